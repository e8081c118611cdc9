/* The loader's lifecycle on real folders: policies, new and removed versions, folders still being
 * written, corrupt versions, held handles across an unload, warmup, memory accounting, the poll
 * thread. Each version V of the test model computes 0.5 x + V, so every answer says who served. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tests/loader/helpers.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static char *base_with(const int64_t *versions, int n)
{
    char *base = tfs_test_mkdtemp();
    for (int i = 0; i < n; i++)
        tfs_test_write_version(base, versions[i]);
    return base;
}

static void done(tfs_loader *l, char *base)
{
    tfs_loader_free(l);
    tfs_test_rmtree(base);
    free(base);
}

static bool can_acquire(tfs_loader *l, int64_t version)
{
    tfs_servable *s = NULL;
    if (tfs_loader_acquire(l, "m", version, NULL, &s, NULL) != TFS_OK)
        return false;
    ck_assert_int_eq(tfs_servable_version(s), version);
    ck_assert(tl_predict(s, 2.0f) == 1.0f + (float)version);
    tfs_servable_release(s);
    return true;
}

START_TEST(test_policy_latest_1)
{
    char *base = base_with((const int64_t[]){1, 2, 3}, 3);
    tfs_loader *l = tl_new(base, (tfs_version_policy){.kind = TFS_POLICY_LATEST}, NULL);
    ck_assert_str_eq(tl_states(l, "m"), "3:AVAILABLE");
    ck_assert_int_eq(tl_latest(l, "m"), 3);
    ck_assert(!can_acquire(l, 2));
    tfs_status st;
    tfs_servable *s = NULL;
    ck_assert_int_eq(tfs_loader_acquire(l, "m", 2, NULL, &s, &st), TFS_NOT_FOUND);
    ck_assert_str_eq(st.msg, "Servable not found for request: Specific(m, 2)");
    ck_assert_int_eq(tfs_loader_acquire(l, "other", -1, NULL, &s, &st), TFS_NOT_FOUND);
    ck_assert_str_eq(st.msg, "Servable not found for request: Latest(other)");
    ck_assert_int_eq(tfs_loader_acquire(l, "", -1, NULL, &s, &st), TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(st.msg, "ModelSpec has no name specified.");
    ck_assert(tfs_loader_ready(l));
    done(l, base);
}
END_TEST

START_TEST(test_policy_latest_2_all_specific)
{
    char *base = base_with((const int64_t[]){1, 2, 3}, 3);
    tfs_loader *l = tl_new(base, (tfs_version_policy){.kind = TFS_POLICY_LATEST, .num_versions = 2},
                           NULL);
    ck_assert_str_eq(tl_states(l, "m"), "3:AVAILABLE 2:AVAILABLE");
    ck_assert(can_acquire(l, 2) && can_acquire(l, 3) && !can_acquire(l, 1));
    tfs_loader_free(l);

    l = tl_new(base, (tfs_version_policy){.kind = TFS_POLICY_ALL}, NULL);
    ck_assert_str_eq(tl_states(l, "m"), "3:AVAILABLE 2:AVAILABLE 1:AVAILABLE");
    tfs_loader_stats stats;
    tfs_loader_get_stats(l, &stats);
    ck_assert_int_eq(stats.versions_available, 3);
    ck_assert_int_eq(stats.loads_ok, 3);
    ck_assert_int_eq(stats.loads_failed, 0);
    ck_assert(stats.load_seconds_total > 0);
    tfs_loader_free(l);

    /* specific: the listed versions that exist (7 does not: warned about, not served) */
    const int64_t want[] = {1, 3, 7};
    l = tl_new(base, (tfs_version_policy){.kind = TFS_POLICY_SPECIFIC, .n_versions = 3,
                                          .versions = want}, NULL);
    ck_assert_str_eq(tl_states(l, "m"), "3:AVAILABLE 1:AVAILABLE");
    ck_assert_int_eq(tl_latest(l, "m"), 3);
    /* a new version outside the list is not loaded; a listed one that appears is */
    tfs_test_write_version(base, 4);
    tfs_test_write_version(base, 7);
    tfs_loader_poll_now(l);
    tfs_loader_poll_now(l);
    ck_assert_str_eq(tl_states(l, "m"), "7:AVAILABLE 3:AVAILABLE 1:AVAILABLE");
    done(l, base);
}
END_TEST

/* Non-integer entries are ignored; leading zeros are fine. */
START_TEST(test_non_integer_names)
{
    char *base = base_with((const int64_t[]){1}, 1);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/00000010", base);
    tfs_test_write_model(dir, 10.0f, 0);
    const char *junk[] = {"abc", "1.5", "-3", "+4", "v2", "99999999999999999999"};
    for (int i = 0; i < 6; i++) {
        snprintf(dir, sizeof dir, "%s/%s", base, junk[i]);
        tfs_test_write_model(dir, 100.0f, 0);
    }
    snprintf(dir, sizeof dir, "%s/20", base);
    ck_assert_int_eq(tfs_test_write_file(dir, "a file, not a folder", 20), 0);
    tfs_loader *l = tl_new(base, (tfs_version_policy){.kind = TFS_POLICY_ALL}, NULL);
    ck_assert_str_eq(tl_states(l, "m"), "10:AVAILABLE 1:AVAILABLE");
    ck_assert_int_eq(tl_latest(l, "m"), 10);
    done(l, base);
}
END_TEST

/* A new folder is AVAILABLE after two polls (seen, then seen unchanged), and under latest{1} the
 * old version unloads only once the new one serves. */
START_TEST(test_new_version_two_polls)
{
    char *base = base_with((const int64_t[]){1}, 1);
    tfs_loader *l = tl_new(base, (tfs_version_policy){.kind = TFS_POLICY_LATEST}, NULL);
    tfs_test_write_version(base, 2);
    tfs_loader_poll_now(l);
    ck_assert_str_eq(tl_states(l, "m"), "1:AVAILABLE");
    ck_assert_int_eq(tl_latest(l, "m"), 1);
    tfs_loader_poll_now(l);
    ck_assert_str_eq(tl_states(l, "m"), "2:AVAILABLE 1:END");
    ck_assert_int_eq(tl_latest(l, "m"), 2);
    tfs_loader_stats stats;
    tfs_loader_get_stats(l, &stats);
    ck_assert_int_eq(stats.unloads, 1);
    ck_assert_int_eq(stats.versions_available, 1);

    /* removing the served version brings the older one back before unloading it */
    tfs_test_remove_version(base, 2);
    tfs_loader_poll_now(l);
    ck_assert_str_eq(tl_states(l, "m"), "2:END 1:AVAILABLE");
    ck_assert_int_eq(tl_latest(l, "m"), 1);
    done(l, base);
}
END_TEST

static void copy_file(const char *from_dir, const char *to_dir, const char *name)
{
    char a[4200], b[4200];
    snprintf(a, sizeof a, "%s/%s", from_dir, name);
    snprintf(b, sizeof b, "%s/%s", to_dir, name);
    ck_assert_int_eq(tfs_test_copytree(a, b), 0);
}

/* A folder still being written (no saved_model.pb yet, then files changing between polls) is not
 * loaded until it is complete and unchanged for a poll. */
START_TEST(test_folder_being_written)
{
    char *base = base_with((const int64_t[]){1}, 1);
    char *scratch = tfs_test_mkdtemp(), src[4200], dst[4200];
    snprintf(src, sizeof src, "%s/2", scratch);
    tfs_test_write_model(src, 2.0f, 0);
    tfs_loader *l = tl_new(base, (tfs_version_policy){.kind = TFS_POLICY_LATEST}, NULL);

    snprintf(dst, sizeof dst, "%s/2", base);
    ck_assert_int_eq(mkdir(dst, 0755), 0);
    copy_file(src, dst, "variables");
    for (int i = 0; i < 3; i++) {   /* no saved_model.pb: never loaded */
        tfs_loader_poll_now(l);
        ck_assert_str_eq(tl_states(l, "m"), "1:AVAILABLE");
    }
    copy_file(src, dst, "saved_model.pb");
    tfs_loader_poll_now(l);          /* first seen complete: wait a poll */
    ck_assert_str_eq(tl_states(l, "m"), "1:AVAILABLE");
    char extra[4300];
    snprintf(extra, sizeof extra, "%s/assets.extra", dst);
    ck_assert_int_eq(mkdir(extra, 0755), 0);   /* still being written */
    tfs_loader_poll_now(l);
    ck_assert_str_eq(tl_states(l, "m"), "1:AVAILABLE");
    tfs_loader_poll_now(l);          /* unchanged since the last poll: load */
    ck_assert_str_eq(tl_states(l, "m"), "2:AVAILABLE 1:END");
    ck_assert_int_eq(tl_latest(l, "m"), 2);
    done(l, base);
    tfs_test_rmtree(scratch);
    free(scratch);
}
END_TEST

/* A removed version unloads at once from lookups, but a handle taken before keeps working; the
 * model is freed (END) by the last release. */
START_TEST(test_removed_version_held_handle)
{
    char *base = base_with((const int64_t[]){1, 2}, 2);
    tfs_loader *l = tl_new(base, (tfs_version_policy){.kind = TFS_POLICY_ALL}, NULL);
    tfs_servable *held = NULL;
    tfs_status st;
    ck_assert_int_eq(tfs_loader_acquire(l, "m", -1, NULL, &held, &st), TFS_OK);
    ck_assert_int_eq(tfs_servable_version(held), 2);
    tfs_test_remove_version(base, 2);
    tfs_loader_poll_now(l);
    ck_assert_str_eq(tl_states(l, "m"), "2:UNLOADING 1:AVAILABLE");
    ck_assert(!can_acquire(l, 2));
    ck_assert_int_eq(tl_latest(l, "m"), 1);
    ck_assert(tl_predict(held, 2.0f) == 3.0f);   /* still the version-2 model */
    tfs_loader_stats stats;
    tfs_loader_get_stats(l, &stats);
    ck_assert_int_eq(stats.unloads, 0);
    tfs_servable_release(held);
    ck_assert_str_eq(tl_states(l, "m"), "2:END 1:AVAILABLE");
    tfs_loader_get_stats(l, &stats);
    ck_assert_int_eq(stats.unloads, 1);
    done(l, base);
}
END_TEST

/* "1:1/0 2:0/1" for the loader's SavedModel load records (folder name: successes/failures), in
 * the order the folders were first tried; each success must have taken some microseconds. Static
 * buffer. */
static char records[512];

static void record_row(void *ctx, const char *path, int64_t ok, int64_t failed, int64_t us)
{
    const char *base = ctx, *name = path + strlen(base) + 1;
    size_t      used = strlen(records);
    ck_assert(strncmp(path, base, strlen(base)) == 0);
    ck_assert(ok == 0 ? us == 0 : us > 0);
    snprintf(records + used, sizeof records - used, "%s%s:%lld/%lld", used ? " " : "", name,
             (long long)ok, (long long)failed);
}

static const char *load_records(tfs_loader *l, const char *base)
{
    records[0] = 0;
    tfs_loader_load_records(l, record_row, (void *)base);
    return records;
}

/* A corrupt new version ends with its error; the old version keeps serving and is still "latest";
 * the failure is not retried on every poll, only when the folder changes. */
START_TEST(test_corrupt_new_version)
{
    char *base = base_with((const int64_t[]){1}, 1);
    tfs_loader *l = tl_new(base, (tfs_version_policy){.kind = TFS_POLICY_LATEST}, NULL);
    char dir[4100], pb[4200];
    snprintf(dir, sizeof dir, "%s/2", base);
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    snprintf(pb, sizeof pb, "%s/saved_model.pb", dir);
    ck_assert_int_eq(tfs_test_write_file(pb, "garbage, not a protobuf", 23), 0);
    tfs_loader_poll_now(l);
    tfs_loader_poll_now(l);
    ck_assert_str_eq(tl_states(l, "m"), "2:END 1:AVAILABLE");
    tfs_version_status v2 = tl_status(l, "m", 2);
    ck_assert_int_eq(v2.status.code, TFS_DATA_LOSS);
    ck_assert_msg(strstr(v2.status.msg, "saved_model.pb") != NULL, "%s", v2.status.msg);
    ck_assert_int_eq(tl_latest(l, "m"), 1);
    ck_assert(tfs_loader_ready(l));
    tfs_loader_stats stats;
    tfs_loader_get_stats(l, &stats);
    ck_assert_int_eq(stats.loads_failed, 1);
    for (int i = 0; i < 3; i++)
        tfs_loader_poll_now(l);
    tfs_loader_get_stats(l, &stats);
    ck_assert_int_eq(stats.loads_failed, 1);   /* same files: not retried */
    ck_assert_str_eq(load_records(l, base), "1:1/0 2:0/1");

    /* fixed in place: loads after the folder settles, and replaces version 1 */
    tfs_test_rmtree(dir);
    tfs_test_write_model(dir, 2.0f, 0);
    tfs_loader_poll_now(l);
    tfs_loader_poll_now(l);
    ck_assert_str_eq(tl_states(l, "m"), "2:AVAILABLE 1:END");
    ck_assert_int_eq(tl_latest(l, "m"), 2);
    ck_assert_str_eq(load_records(l, base), "1:1/0 2:1/1");
    done(l, base);
}
END_TEST

/* At start a failed version is recorded and the loader still starts. */
START_TEST(test_failed_initial_load)
{
    char *base = tfs_test_mkdtemp(), dir[4200];
    snprintf(dir, sizeof dir, "%s/5", base);
    ck_assert_int_eq(mkdir(dir, 0755), 0);
    snprintf(dir, sizeof dir, "%s/5/saved_model.pb", base);
    ck_assert_int_eq(tfs_test_write_file(dir, "junk", 4), 0);
    tfs_loader *l = tl_new(base, (tfs_version_policy){.kind = TFS_POLICY_LATEST}, NULL);
    ck_assert_str_eq(tl_states(l, "m"), "5:END");
    ck_assert(!tfs_loader_ready(l));
    ck_assert_int_eq(tl_latest(l, "m"), -1);
    tfs_status st;
    tfs_version_status *vs = NULL;
    int n = 0;
    ck_assert_int_eq(tfs_loader_model_status(l, "m", 9, &vs, &n, &st), TFS_NOT_FOUND);
    ck_assert_str_eq(st.msg, "Could not find version 9 of model m");
    ck_assert_int_eq(tfs_loader_model_status(l, "zz", -1, &vs, &n, &st), TFS_NOT_FOUND);
    ck_assert_str_eq(st.msg, "Could not find any versions of model zz");
    done(l, base);
}
END_TEST

static enum tfs_code warmup_refuses_3(void *ctx, const char *model, int64_t version,
                                      const char *dir, const tfs_savedmodel *m, tfs_status *st)
{
    int *calls = ctx;
    __atomic_add_fetch(calls, 1, __ATOMIC_SEQ_CST);
    ck_assert_str_eq(model, "m");
    ck_assert_ptr_nonnull(strstr(dir, "/"));
    ck_assert_ptr_nonnull(tfs_savedmodel_signature(m, "serving_default"));
    if (version == 3)
        return TFS_ERR(st, TFS_INVALID_ARGUMENT, "warmup request 0 of version 3 failed");
    return TFS_OK;
}

START_TEST(test_warmup_failure_fails_load)
{
    char *base = base_with((const int64_t[]){2}, 1);
    int calls = 0;
    tfs_loader_opts o = tl_opts();
    o.warmup = warmup_refuses_3;
    o.warmup_ctx = &calls;
    tfs_loader *l = tl_new(base, (tfs_version_policy){.kind = TFS_POLICY_LATEST}, &o);
    ck_assert_int_eq(calls, 1);
    tfs_test_write_version(base, 3);
    tfs_loader_poll_now(l);
    tfs_loader_poll_now(l);
    ck_assert_int_eq(calls, 2);
    ck_assert_str_eq(tl_states(l, "m"), "3:END 2:AVAILABLE");
    tfs_version_status v3 = tl_status(l, "m", 3);
    ck_assert_int_eq(v3.status.code, TFS_INVALID_ARGUMENT);
    ck_assert_str_eq(v3.status.msg, "warmup request 0 of version 3 failed");
    ck_assert_int_eq(tl_latest(l, "m"), 2);
    done(l, base);
}
END_TEST

START_TEST(test_memory_accounting_and_limit)
{
    char *base = tfs_test_mkdtemp(), dir[4200];
    snprintf(dir, sizeof dir, "%s/1", base);
    tfs_test_write_model(dir, 1.0f, 4096);   /* 16 KiB of padding */
    tfs_loader *l = tl_new(base, (tfs_version_policy){.kind = TFS_POLICY_ALL}, NULL);
    tfs_version_status v1 = tl_status(l, "m", 1);
    ck_assert_msg(v1.memory_bytes >= 4096 * 4 + 8 && v1.memory_bytes < 4096 * 4 + 4096,
                  "memory_bytes %lld", (long long)v1.memory_bytes);
    ck_assert(v1.load_seconds > 0);
    tfs_loader_stats stats;
    tfs_loader_get_stats(l, &stats);
    ck_assert_int_eq(stats.memory_bytes, v1.memory_bytes);
    tfs_test_write_version(base, 2);   /* small */
    tfs_loader_poll_now(l);
    tfs_loader_poll_now(l);
    tfs_version_status v2 = tl_status(l, "m", 2);
    tfs_loader_get_stats(l, &stats);
    ck_assert_int_eq(stats.memory_bytes, v1.memory_bytes + v2.memory_bytes);
    tfs_loader_free(l);

    /* a limit that holds version 1 but not 1 and 2: 2 fails, 1 serves */
    tfs_loader_opts o = tl_opts();
    o.max_model_memory_bytes = 30000;
    tfs_test_remove_version(base, 2);
    l = tl_new(base, (tfs_version_policy){.kind = TFS_POLICY_ALL}, &o);
    ck_assert_str_eq(tl_states(l, "m"), "1:AVAILABLE");
    snprintf(dir, sizeof dir, "%s/2", base);
    tfs_test_write_model(dir, 2.0f, 4096);
    tfs_loader_poll_now(l);
    tfs_loader_poll_now(l);
    ck_assert_str_eq(tl_states(l, "m"), "2:END 1:AVAILABLE");
    v2 = tl_status(l, "m", 2);
    ck_assert_int_eq(v2.status.code, TFS_RESOURCE_EXHAUSTED);
    ck_assert_msg(strstr(v2.status.msg, "model 'm' version 2 needs about ") &&
                  strstr(v2.status.msg, "of the 30000 byte limit"), "%s", v2.status.msg);
    tfs_loader_get_stats(l, &stats);
    ck_assert_int_eq(stats.memory_bytes, tl_status(l, "m", 1).memory_bytes);
    done(l, base);
}
END_TEST

/* With a short poll period the poll thread finds a new version by itself; free returns at once
 * even with a long period. */
START_TEST(test_poll_thread)
{
    char *base = base_with((const int64_t[]){1}, 1);
    tfs_loader_opts o = tl_opts();
    o.file_system_poll_wait_seconds = 0.1;
    tfs_loader *l = tl_new(base, (tfs_version_policy){.kind = TFS_POLICY_LATEST}, &o);
    double t0 = now_s();
    tfs_test_write_version(base, 2);
    while (tl_latest(l, "m") != 2 && now_s() - t0 < 10)
        nanosleep(&(struct timespec){.tv_nsec = 5000000}, NULL);
    double took = now_s() - t0;
    ck_assert_int_eq(tl_latest(l, "m"), 2);
    fprintf(stderr, "poll thread: new version AVAILABLE after %.3f s (poll 0.1 s)\n", took);
    ck_assert_msg(took < 2.0, "took %.3f s with a 0.1 s poll", took);
    tfs_loader_free(l);

    o.file_system_poll_wait_seconds = 30;
    l = tl_new(base, (tfs_version_policy){.kind = TFS_POLICY_LATEST}, &o);
    t0 = now_s();
    tfs_loader_free(l);
    ck_assert_msg(now_s() - t0 < 1.0, "free took %.3f s", now_s() - t0);
    tfs_test_rmtree(base);
    free(base);
}
END_TEST

/* Empty base path: starts, not ready; the first version to appear loads. */
START_TEST(test_empty_base_path)
{
    char *base = tfs_test_mkdtemp();
    tfs_loader *l = tl_new(base, (tfs_version_policy){.kind = TFS_POLICY_LATEST}, NULL);
    ck_assert(!tfs_loader_ready(l));
    ck_assert_str_eq(tl_states(l, "m"), "");
    tfs_test_write_version(base, 4);
    tfs_loader_poll_now(l);
    tfs_loader_poll_now(l);
    ck_assert(tfs_loader_ready(l));
    ck_assert_int_eq(tl_latest(l, "m"), 4);
    /* every version removed: nothing is aspired, so it unloads */
    tfs_test_remove_version(base, 4);
    tfs_loader_poll_now(l);
    ck_assert_str_eq(tl_states(l, "m"), "4:END");
    ck_assert(!tfs_loader_ready(l));
    done(l, base);
}
END_TEST

/* Warnings of module "loader", collected by a sink. */
static char warnings[8192];

static void warn_sink(enum tfs_log_level level, const char *module, const char *line, void *user)
{
    (void)user;
    size_t used = strlen(warnings);
    if (level >= TFS_LOG_LEVEL_WARN && !strcmp(module, "loader"))
        snprintf(warnings + used, sizeof warnings - used, "%s\n", line);
}

/* A base path that is missing, or a symlink loop: the loader starts, serves nothing, reports why
 * (tfs_loader_base_path_error) and picks the model up once the path holds a version. A base path
 * holding only entries that are not versions warns naming them. */
START_TEST(test_unreadable_base_path)
{
    char *tmp = tfs_test_mkdtemp(), base[4200];
    snprintf(base, sizeof base, "%s/m", tmp);
    tfs_status st;
    tfs_loader *l = tl_new(base, (tfs_version_policy){.kind = TFS_POLICY_LATEST}, NULL);
    ck_assert(!tfs_loader_ready(l));
    ck_assert_int_eq(tfs_loader_base_path_error(l, "m", &st), TFS_NOT_FOUND);
    ck_assert_msg(strstr(st.msg, "model 'm': cannot read base path ") &&
                  strstr(st.msg, "/m: No such file or directory"), "%s", st.msg);
    ck_assert_int_eq(tfs_loader_base_path_error(l, "other", &st), TFS_OK);
    ck_assert_int_eq(mkdir(base, 0755), 0);
    tfs_test_write_version(base, 3);
    tfs_loader_poll_now(l);
    ck_assert_int_eq(tfs_loader_base_path_error(l, "m", &st), TFS_OK);
    ck_assert_int_eq(tl_latest(l, "m"), 3);
    ck_assert(tfs_loader_ready(l));
    /* the base path replaced by a symlink loop: reported, and version 3 keeps serving */
    char moved[4300];
    snprintf(moved, sizeof moved, "%s.moved", base);
    ck_assert_int_eq(rename(base, moved), 0);
    ck_assert_int_eq(symlink(base, base), 0);
    tfs_loader_poll_now(l);
    ck_assert_int_eq(tfs_loader_base_path_error(l, "m", &st), TFS_UNKNOWN);   /* ELOOP */
    ck_assert_msg(strstr(st.msg, "Too many levels of symbolic links"), "%s", st.msg);
    ck_assert_int_eq(tl_latest(l, "m"), 3);
    tfs_loader_free(l);
    unlink(base);

    /* only entries that are not versions: the warning names them */
    ck_assert_int_eq(mkdir(base, 0755), 0);
    snprintf(moved, sizeof moved, "%s/v1", base);
    tfs_test_write_model(moved, 1.0f, 0);
    warnings[0] = 0;
    tfs_log_set_sink(warn_sink, NULL);
    l = tl_new(base, (tfs_version_policy){.kind = TFS_POLICY_LATEST}, NULL);
    tfs_log_set_sink(NULL, NULL);
    ck_assert_msg(strstr(warnings, "No versions of servable m found under base path ") &&
                  strstr(warnings, " (version folders are named by integers; ignored: 'v1')"),
                  "%s", warnings);
    ck_assert(!tfs_loader_ready(l));
    ck_assert_int_eq(tfs_loader_base_path_error(l, "m", &st), TFS_OK);
    tfs_loader_free(l);
    tfs_test_rmtree(tmp);
    free(tmp);
}
END_TEST

Suite *suite_loader_lifecycle(void);
Suite *suite_loader_lifecycle(void)
{
    Suite *s = suite_create("lifecycle");
    TCase *tc = tcase_create("lifecycle");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_policy_latest_1);
    tcase_add_test(tc, test_policy_latest_2_all_specific);
    tcase_add_test(tc, test_non_integer_names);
    tcase_add_test(tc, test_new_version_two_polls);
    tcase_add_test(tc, test_folder_being_written);
    tcase_add_test(tc, test_removed_version_held_handle);
    tcase_add_test(tc, test_corrupt_new_version);
    tcase_add_test(tc, test_failed_initial_load);
    tcase_add_test(tc, test_warmup_failure_fails_load);
    tcase_add_test(tc, test_memory_accounting_and_limit);
    tcase_add_test(tc, test_poll_thread);
    tcase_add_test(tc, test_empty_base_path);
    tcase_add_test(tc, test_unreadable_base_path);
    suite_add_tcase(s, tc);
    return s;
}
