/* TLS material for both front ends: PEM files read into memory and checked with OpenSSL (the
 * library the gRPC core's TLS runs on) before a listener starts. Neither the C core nor
 * libmicrohttpd says which part of the material it rejected (the C core only fails to add the
 * port, which reads like an address in use), so a bad key or certificate is caught here, where
 * the message can name the file and the field.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <grpc/grpc_security.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "proto/textformat.h"
#include "runtime/alloc.h"
#include "runtime/log.h"
#include "server/grpc-impl.h"
#include "server/server.h"
#include "tensorflow_serving/config/ssl_config.pb-c.h"

#define LOG_MODULE   "tls"
#define MAX_PEM_FILE (1 << 20)   /* keys and certificate chains are a few KiB */

enum tfs_code tfs__tls_read_file(const char *path, char **out, tfs_status *st)
{
    tfs__buf      b;
    char          chunk[4096];
    size_t        n;
    enum tfs_code code = TFS_OK;

    *out = NULL;
    tfs__buf_init(&b);
    FILE *f = fopen(path, "rb");
    if (!f)
        return TFS_ERR(st, tfs_code_from_errno(errno), "could not open '%s': %s", path,
                       strerror(errno));
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0 && b.len <= MAX_PEM_FILE)
        tfs__buf_append(&b, chunk, n);
    if (ferror(f))
        code = TFS_ERR(st, tfs_code_from_errno(errno), "could not read '%s': %s", path,
                       strerror(errno));
    else if (b.len > MAX_PEM_FILE)
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "could not read '%s': more than the 1 MiB a "
                       "PEM file may have", path);
    fclose(f);
    if (code != TFS_OK) {
        tfs__buf_deinit(&b);
        return code;
    }
    if (!(*out = tfs__buf_take(&b, NULL)))   /* NUL-terminated by the buffer */
        return TFS_ERR(st, TFS_RESOURCE_EXHAUSTED, "out of memory reading '%s'", path);
    return TFS_OK;
}

/* An encrypted key would otherwise make OpenSSL prompt on the terminal; the servers have no
 * passphrase to give. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf, (void)size, (void)rwflag, (void)u;
    return -1;
}

/* Why OpenSSL refused pem: text without any PEM block gets reasons such as "unsupported", which
 * say less than that. */
static const char *ssl_why(const char *pem)
{
    if (!strstr(pem, "-----BEGIN "))
        return "no -----BEGIN line";
    unsigned long e = ERR_peek_last_error();
    const char   *r = e ? ERR_reason_error_string(e) : NULL;
    return r ? r : "unreadable PEM";
}

enum tfs_code tfs__tls_check(const tfs__tls_pems *p, tfs_status *st)
{
    EVP_PKEY *key = NULL;
    X509     *cert = NULL;
    STACK_OF(X509_INFO) *cas = NULL;
    BIO      *b = NULL;
    enum tfs_code code = TFS_OK;

    ERR_clear_error();
    if (!p->key || !*p->key || !p->cert || !*p->cert) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s is empty",
                       !p->key || !*p->key ? p->key_name : p->cert_name);
        goto done;
    }
    if (!(b = BIO_new_mem_buf(p->key, -1)) ||
        !(key = PEM_read_bio_PrivateKey(b, NULL, no_passphrase, NULL))) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s is not a PEM private key, or needs a "
                       "passphrase (%s)", p->key_name, ssl_why(p->key));
        goto done;
    }
    BIO_free(b);
    if (!(b = BIO_new_mem_buf(p->cert, -1)) || !(cert = PEM_read_bio_X509(b, NULL, NULL, NULL))) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s is not a PEM certificate (%s)", p->cert_name,
                       ssl_why(p->cert));
        goto done;
    }
    if (X509_check_private_key(cert, key) != 1) {
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s does not match the certificate in %s",
                       p->key_name, p->cert_name);
        goto done;
    }
    if (p->ca && *p->ca) {
        BIO_free(b);
        int n_certs = 0;
        if ((b = BIO_new_mem_buf(p->ca, -1)) &&
            (cas = PEM_X509_INFO_read_bio(b, NULL, NULL, NULL)))
            for (int i = 0; i < sk_X509_INFO_num(cas); i++)
                n_certs += sk_X509_INFO_value(cas, i)->x509 != NULL;
        if (n_certs == 0) {
            code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "%s holds no PEM certificate (%s)",
                           p->ca_name, ssl_why(p->ca));
            goto done;
        }
    }
done:
    sk_X509_INFO_pop_free(cas, X509_INFO_free);
    X509_free(cert);
    EVP_PKEY_free(key);
    BIO_free(b);
    ERR_clear_error();
    return code;
}

/* The SSLConfig text at path, parsed and its material checked; *out is freed by the caller with
 * protobuf_c_message_free_unpacked (NULL on failure). */
static enum tfs_code ssl_config_read(const char *path, Tensorflow__Serving__SSLConfig **out,
                                     tfs_status *st)
{
    Tensorflow__Serving__SSLConfig *c = NULL;
    enum tfs_code                   code;

    *out = NULL;
    code = tfs_textformat_parse_file(&tensorflow__serving__sslconfig__descriptor, path,
                                     (ProtobufCMessage **)&c, st);
    if (code != TFS_OK) {
        tfs_status_prefix(st, "--ssl_config_file");
        return code;
    }
    tfs__tls_pems pems = {.key = c->server_key, .cert = c->server_cert, .ca = c->custom_ca,
                          .key_name = "server_key", .cert_name = "server_cert",
                          .ca_name = "custom_ca"};
    if (c->client_verify && !*c->custom_ca)
        code = TFS_ERR(st, TFS_INVALID_ARGUMENT, "client_verify is true but custom_ca is empty: "
                       "client certificates need a CA to be checked against");
    else
        code = tfs__tls_check(&pems, st);
    if (code != TFS_OK) {
        tfs_status_prefix(st, "--ssl_config_file=%s", path);
        protobuf_c_message_free_unpacked(&c->base, NULL);
        return code;
    }
    *out = c;
    return TFS_OK;
}

enum tfs_code tfs_server_tls_check(const tfs_server_flags *f, tfs_status *st)
{
    enum tfs_code code = TFS_OK;
    if (*f->ssl_config_file) {
        Tensorflow__Serving__SSLConfig *c;
        if ((code = ssl_config_read(f->ssl_config_file, &c, st)) != TFS_OK)
            return code;
        protobuf_c_message_free_unpacked(&c->base, NULL);
    }
    if (f->rest_api_port > 0 && *f->rest_api_ssl_cert_file && *f->rest_api_ssl_key_file) {
        char *cert = NULL, *key = NULL;
        if ((code = tfs__tls_read_file(f->rest_api_ssl_cert_file, &cert, st)) == TFS_OK &&
            (code = tfs__tls_read_file(f->rest_api_ssl_key_file, &key, st)) == TFS_OK) {
            tfs__tls_pems pems = {.key = key, .cert = cert,
                                  .key_name = f->rest_api_ssl_key_file,
                                  .cert_name = f->rest_api_ssl_cert_file};
            code = tfs__tls_check(&pems, st);
        }
        tfs_free(cert);
        tfs_free(key);
    }
    return code;
}

enum tfs_code tfs__grpc_ssl_credentials(const char *path, grpc_server_credentials **out,
                                        tfs_status *st)
{
    Tensorflow__Serving__SSLConfig *c = NULL;
    enum tfs_code                   code;

    *out = NULL;
    if ((code = ssl_config_read(path, &c, st)) != TFS_OK)
        return code;
    grpc_ssl_pem_key_cert_pair pair = {.private_key = c->server_key,
                                       .cert_chain = c->server_cert};
    /* The C core copies the PEM strings. */
    *out = grpc_ssl_server_credentials_create_ex(
        *c->custom_ca ? c->custom_ca : NULL, &pair, 1,
        c->client_verify ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                         : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
        NULL);
    if (!*out) {
        code = TFS_ERR(st, TFS_INTERNAL, "--ssl_config_file=%s: the gRPC core refused the TLS "
                       "credentials", path);
        goto done;
    }
    TFS_LOG_INFO(LOG_MODULE, "gRPC serves TLS with the key and certificate of %s; client "
                 "certificates %s", path,
                 c->client_verify ? "required and verified against custom_ca" : "not requested");
done:
    protobuf_c_message_free_unpacked(&c->base, NULL);
    return code;
}
