/* A small leveled logger. One line per record on stderr (or a sink set with tfs_log_set_sink):
 * "2026-11-22T10:00:00.123Z I loader: loaded version 123 of model 'x'".
 * The level test happens before the arguments are evaluated. Thread-safe.
 */
#ifndef TFS_RUNTIME_LOG_H
#define TFS_RUNTIME_LOG_H

enum tfs_log_level { TFS_LOG_LEVEL_DEBUG = 0, TFS_LOG_LEVEL_INFO, TFS_LOG_LEVEL_WARN,
                     TFS_LOG_LEVEL_ERROR, TFS_LOG_LEVEL_OFF };

typedef void (*tfs_log_sink)(enum tfs_log_level level, const char *module, const char *line,
                             void *user);

void tfs_log_set_level(enum tfs_log_level level);
enum tfs_log_level tfs_log_level(void);
void tfs_log_set_sink(tfs_log_sink sink, void *user);   /* NULL restores stderr */
void tfs_log_write(enum tfs_log_level level, const char *module, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define TFS_LOG_(lvl, module, ...) \
    do { if ((lvl) >= tfs_log_level()) tfs_log_write((lvl), (module), __VA_ARGS__); } while (0)
#define TFS_LOG_DEBUG(module, ...) TFS_LOG_(TFS_LOG_LEVEL_DEBUG, module, __VA_ARGS__)
#define TFS_LOG_INFO(module, ...)  TFS_LOG_(TFS_LOG_LEVEL_INFO, module, __VA_ARGS__)
#define TFS_LOG_WARN(module, ...)  TFS_LOG_(TFS_LOG_LEVEL_WARN, module, __VA_ARGS__)
#define TFS_LOG_ERROR(module, ...) TFS_LOG_(TFS_LOG_LEVEL_ERROR, module, __VA_ARGS__)

#endif
