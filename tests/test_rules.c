/* The SDK's small rules: paths, labels, names, TTL, time, encodings, and
   the error model. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../agentsandbox.h"
#include "asbtest.h"
#include <time.h>

static asb_result norm(const char *in, char *out, size_t cap, asb_error *err) {
    return asb_path_normalize(in, strlen(in), out, cap, NULL, err);
}

ASBT_TEST(safe_paths_are_normalised_like_posix) {
    static const char *cases[][2] = {
        {"/etc/passwd", "etc/passwd"},   {"/dir/foo.txt", "dir/foo.txt"},
        {"dir//foo.txt", "dir/foo.txt"}, {"./a/./b", "a/b"},
        {"a/b/../c", "a/c"},             {"  a.txt  ", "a.txt"},
        {"/../etc/x", "etc/x"},          {"a/../../..//b/../c", ""},
        {"...", "..."},                  {"a/..b", "a/..b"},
        {"x/y/z/../../w", "x/w"},        {"\xc3\xa9t\xc3\xa9.txt", "\xc3\xa9t\xc3\xa9.txt"},
        /* a trailing '/' goes, as posixpath.normpath drops it upstream */
        {"dir/", "dir"},                 {"a/b//", "a/b"},
        {"/dir/./", "dir"},              {"dir/sub/../", "dir"},
    };
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[64];
        asb_error err;
        asb_result r = norm(cases[i][0], out, sizeof out, &err);
        if (cases[i][1][0] == '\0') {
            ASBT_EQ_RES(r, ASB_ERR_INVALID_ARGUMENT);
            continue;
        }
        if (r != ASB_OK) fprintf(stderr, "    %s: %s\n", cases[i][0], err.message);
        ASBT_EQ_RES(r, ASB_OK);
        ASBT_EQ_STR(out, cases[i][1]);
    }
}

ASBT_TEST(path_traversal_is_rejected_before_any_request) {
    static const char *bad[] = {"../etc/passwd", "dir/../../etc/passwd", "..",
                                "a/../..", "./../x", "../", "dir/../../"};
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char out[64];
        asb_error err;
        ASBT_EQ_RES(norm(bad[i], out, sizeof out, &err), ASB_ERR_INVALID_ARGUMENT);
        ASBT_CONTAINS(err.message, "escapes the base directory");
    }
}

ASBT_TEST(empty_dot_and_directory_paths_name_no_file) {
    char out[64];
    asb_error err;
    ASBT_EQ_RES(norm("", out, sizeof out, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "empty");
    ASBT_EQ_RES(norm("   ", out, sizeof out, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "empty");
    ASBT_EQ_RES(norm(".", out, sizeof out, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "base directory");
    ASBT_EQ_RES(norm("/", out, sizeof out, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_EQ_RES(norm("//", out, sizeof out, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_EQ_RES(norm("./", out, sizeof out, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_EQ_RES(norm("a/../", out, sizeof out, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "base directory");
    ASBT_EQ_RES(norm("a/..", out, sizeof out, &err), ASB_ERR_INVALID_ARGUMENT);
}

ASBT_TEST(control_characters_are_rejected_before_normalising) {
    static const char *bad[] = {"foo\n.txt", "a\tb", "a\rb", "x\x7fy", "\x1b"};
    char out[64];
    asb_error err;
    size_t i;
    /* a NUL must not hide the ".." that follows it */
    ASBT_EQ_RES(asb_path_normalize("foo\0../etc/passwd", 17, out, sizeof out,
                                   NULL, &err),
                ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "control character 0x00 at byte 3");
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ASBT_EQ_RES(norm(bad[i], out, sizeof out, &err), ASB_ERR_INVALID_ARGUMENT);
}

ASBT_TEST(normalised_path_that_does_not_fit_is_too_large) {
    char out[4];
    size_t n = 0;
    ASBT_EQ_RES(norm("abcd", out, sizeof out, NULL), ASB_ERR_TOO_LARGE);
    ASBT_EQ_RES(asb_path_normalize("abc", 3, out, sizeof out, &n, NULL), ASB_OK);
    ASBT_EQ_INT(n, 3);
}

ASBT_TEST(valid_label_keys_and_values_pass) {
    static const char *keys[] = {"app", "a", "agents.x-k8s.io/created-by",
                                 "example.com/A_b.c-D", "x/y", "A9"};
    static const char *vals[] = {"", "v", "my-Value_1.2", "0"};
    size_t i;
    for (i = 0; i < sizeof keys / sizeof keys[0]; i++)
        ASBT_EQ_RES(asb_label_validate_key(keys[i], strlen(keys[i]), NULL), ASB_OK);
    for (i = 0; i < sizeof vals / sizeof vals[0]; i++)
        ASBT_EQ_RES(asb_label_validate_value(vals[i], strlen(vals[i]), NULL),
                    ASB_OK);
}

ASBT_TEST(bad_label_keys_name_the_key_and_the_rule) {
    static const char *bad[][2] = {
        {"", "empty"},
        {"bad key", "may contain only"},
        {"-x", "begin and end"},
        {"x-", "begin and end"},
        {"/name", "prefix before '/' is empty"},
        {"pre/", "name after '/' is empty"},
        {"Upper.com/x", "DNS subdomain"},
        {"a_b.com/x", "DNS subdomain"},
        {"a/b/c", "may contain only"},
    };
    size_t i;
    char longname[80], longprefix[300];
    asb_error err;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASBT_EQ_RES(asb_label_validate_key(bad[i][0], strlen(bad[i][0]), &err),
                    ASB_ERR_INVALID_ARGUMENT);
        ASBT_CONTAINS(err.message, bad[i][1]);
        if (bad[i][0][0]) ASBT_CONTAINS(err.message, bad[i][0]);
    }
    memset(longname, 'a', 64);
    longname[64] = 0;
    ASBT_EQ_RES(asb_label_validate_key(longname, 64, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "longer than 63");
    ASBT_EQ_RES(asb_label_validate_key(longname, 63, &err), ASB_OK);
    memset(longprefix, 'p', 254);
    longprefix[254] = '/';
    longprefix[255] = 'n';
    longprefix[256] = 0;
    ASBT_EQ_RES(asb_label_validate_key(longprefix, 256, &err),
                ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "longer than 253");
    ASBT_EQ_RES(asb_label_validate_key(longprefix + 1, 255, &err), ASB_OK);
}

ASBT_TEST(bad_label_values_name_the_value_and_its_key) {
    asb_label labels[2];
    asb_error err;
    labels[0].key = "ok";
    labels[0].value = "fine";
    labels[1].key = "team";
    labels[1].value = "no spaces";
    ASBT_EQ_RES(asb_labels_validate(labels, 2, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "no spaces");
    ASBT_CONTAINS(err.message, "key \"team\"");
    labels[1].value = "_x";
    ASBT_EQ_RES(asb_labels_validate(labels, 2, &err), ASB_ERR_INVALID_ARGUMENT);
    labels[1].value = NULL;
    ASBT_EQ_RES(asb_labels_validate(labels, 2, &err), ASB_ERR_INVALID_ARGUMENT);
    labels[1].value = "ok";
    ASBT_EQ_RES(asb_labels_validate(labels, 2, &err), ASB_OK);
    ASBT_EQ_RES(asb_labels_validate(NULL, 0, &err), ASB_OK);
}

ASBT_TEST(dns_labels_guard_names_that_go_into_headers) {
    static const char *ok[] = {"default", "a", "sandbox-1", "0abc"};
    static const char *bad[] = {"", "Foo_Bar", "a.b", "a/b", "-a", "a-",
                                "UPPER", "a\r\nX-Evil: 1"};
    char l64[65];
    size_t i;
    for (i = 0; i < sizeof ok / sizeof ok[0]; i++)
        ASBT_EQ_RES(asb_dns_label_validate(ok[i], strlen(ok[i]), NULL), ASB_OK);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
        ASBT_EQ_RES(asb_dns_label_validate(bad[i], strlen(bad[i]), NULL),
                    ASB_ERR_INVALID_ARGUMENT);
    memset(l64, 'a', 64);
    ASBT_EQ_RES(asb_dns_label_validate(l64, 64, NULL), ASB_ERR_INVALID_ARGUMENT);
    ASBT_EQ_RES(asb_dns_label_validate(l64, 63, NULL), ASB_OK);
}

ASBT_TEST(claim_names_are_random_hex_with_the_prefix) {
    char names[64][ASB_CLAIM_NAME_SIZE];
    int i, j, k;
    for (i = 0; i < 64; i++) {
        ASBT_EQ_RES(asb_claim_name_generate(names[i], NULL), ASB_OK);
        ASBT_EQ_INT(strlen(names[i]), 22);
        ASBT_CHECK(strncmp(names[i], "sandbox-claim-", 14) == 0);
        for (k = 14; k < 22; k++)
            ASBT_CHECK((names[i][k] >= '0' && names[i][k] <= '9') ||
                       (names[i][k] >= 'a' && names[i][k] <= 'f'));
        ASBT_EQ_RES(asb_dns_label_validate(names[i], 22, NULL), ASB_OK);
        for (j = 0; j < i; j++) ASBT_CHECK(strcmp(names[i], names[j]) != 0);
    }
}

ASBT_TEST(ttl_becomes_a_utc_shutdown_time) {
    char out[ASB_TIME_SIZE];
    asb_error err;
    ASBT_EQ_RES(asb_shutdown_time_from_ttl(1700000000, 3600, out, &err), ASB_OK);
    ASBT_EQ_STR(out, "2023-11-14T23:13:20Z");
    ASBT_EQ_RES(asb_shutdown_time_from_ttl(1700000000, 0, out, &err),
                ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "positive");
    ASBT_EQ_RES(asb_shutdown_time_from_ttl(1700000000, -5, out, &err),
                ASB_ERR_INVALID_ARGUMENT);
    ASBT_EQ_RES(asb_shutdown_time_from_ttl(1700000000, INT64_MAX, out, &err),
                ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "overflows");
    ASBT_EQ_RES(asb_shutdown_time_from_ttl(0, 253402300799LL, out, &err), ASB_OK);
    ASBT_EQ_STR(out, "9999-12-31T23:59:59Z");
    ASBT_EQ_RES(asb_shutdown_time_from_ttl(1, 253402300799LL, out, &err),
                ASB_ERR_INVALID_ARGUMENT);
}

ASBT_TEST(time_format_agrees_with_gmtime) {
    /* libc's gmtime_r is the oracle, over a spread of instants including
       leap days, century years and times before 1970 */
    uint64_t x = 88172645463325252ULL;
    int i;
    for (i = 0; i < 20000; i++) {
        int64_t t;
        time_t tt;
        struct tm tm;
        char ours[ASB_TIME_SIZE], theirs[64];
        int64_t back = 0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        t = (int64_t)(x % 253402300800ULL) - (i % 3 == 0 ? 62135596800LL : 0);
        tt = (time_t)t;
        ASBT_CHECK(gmtime_r(&tt, &tm) != NULL);
        snprintf(theirs, sizeof theirs, "%04d-%02d-%02dT%02d:%02d:%02dZ",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
                 tm.tm_min, tm.tm_sec);
        ASBT_EQ_RES(asb_time_format_rfc3339(t, ours), ASB_OK);
        ASBT_EQ_STR(ours, theirs);
        ASBT_EQ_RES(asb_time_parse_rfc3339(ours, 20, &back, NULL), ASB_OK);
        ASBT_EQ_INT(back, t);
    }
    {
        char out[ASB_TIME_SIZE];
        ASBT_EQ_RES(asb_time_format_rfc3339(253402300800LL, out),
                    ASB_ERR_INVALID_ARGUMENT);
        ASBT_EQ_RES(asb_time_format_rfc3339(-62167219201LL, out),
                    ASB_ERR_INVALID_ARGUMENT);
        ASBT_EQ_RES(asb_time_format_rfc3339(-62167219200LL, out), ASB_OK);
        ASBT_EQ_STR(out, "0000-01-01T00:00:00Z");
    }
}

ASBT_TEST(rfc3339_offsets_fractions_and_bad_dates) {
    int64_t t = 0;
    asb_error err;
    ASBT_EQ_RES(asb_time_parse_rfc3339("1970-01-01T00:00:00Z", 20, &t, &err), ASB_OK);
    ASBT_EQ_INT(t, 0);
    ASBT_EQ_RES(asb_time_parse_rfc3339("2024-02-29t12:00:00.123456789+02:00", 35,
                                       &t, &err),
                ASB_OK);
    ASBT_EQ_INT(t, 1709208000LL - 7200);
    ASBT_EQ_RES(asb_time_parse_rfc3339("2024-02-29 12:00:00-00:30", 25, &t, &err),
                ASB_OK);
    ASBT_EQ_INT(t, 1709208000LL + 1800); /* 12:00 at -00:30 is 12:30Z */
    ASBT_EQ_RES(asb_time_parse_rfc3339("2023-02-29T00:00:00Z", 20, &t, &err),
                ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "2023-02-29");
    {
        static const char *bad[] = {"2023-13-01T00:00:00Z", "2023-01-01T24:00:00Z",
                                    "2023-01-01T00:00:00", "2023-01-01T00:00:00.Z",
                                    "2023-01-01T00:00:00+0200", "2023-1-01T00:00:00Z",
                                    "2023-01-01T00:00:00Zjunk", "1900-02-29T00:00:00Z"};
        size_t i;
        for (i = 0; i < sizeof bad / sizeof bad[0]; i++)
            ASBT_EQ_RES(asb_time_parse_rfc3339(bad[i], strlen(bad[i]), &t, NULL),
                        ASB_ERR_INVALID_ARGUMENT);
    }
}

ASBT_TEST(percent_encoding_keeps_only_unreserved_bytes) {
    asb_buf b;
    int i;
    asb_buf_init(&b, NULL);
    ASBT_EQ_RES(asb_percent_encode_segment("a/b c.txt~_-", 12, &b), ASB_OK);
    ASBT_EQ_STR(b.ptr, "a%2Fb%20c.txt~_-");
    b.len = 0;
    ASBT_EQ_RES(asb_percent_encode_segment(".", 1, &b), ASB_OK);
    ASBT_EQ_STR(b.ptr, "%2E");
    b.len = 0;
    ASBT_EQ_RES(asb_percent_encode_segment("..", 2, &b), ASB_OK);
    ASBT_EQ_STR(b.ptr, "%2E%2E");
    b.len = 0;
    ASBT_EQ_RES(asb_percent_encode_segment("...", 3, &b), ASB_OK);
    ASBT_EQ_STR(b.ptr, "...");
    for (i = 0; i < 256; i++) {
        char c = (char)i, want[4];
        int unreserved = (i >= 'a' && i <= 'z') || (i >= 'A' && i <= 'Z') ||
                         (i >= '0' && i <= '9') || i == '-' || i == '_' ||
                         i == '.' || i == '~';
        b.len = 0;
        ASBT_EQ_RES(asb_percent_encode_segment(&c, 1, &b), ASB_OK);
        if (unreserved && i != '.') {
            ASBT_EQ_MEM(b.ptr, b.len, &c, 1);
        } else if (i != '.') {
            snprintf(want, sizeof want, "%%%02X", i);
            ASBT_EQ_MEM(b.ptr, b.len, want, 3);
        }
    }
    asb_buf_free(&b);
}

ASBT_TEST(base64_matches_rfc4648_vectors) {
    static const char *vec[][2] = {{"", ""},         {"f", "Zg=="},
                                   {"fo", "Zm8="},   {"foo", "Zm9v"},
                                   {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="},
                                   {"foobar", "Zm9vYmFy"}};
    size_t i;
    asb_buf b;
    asb_buf_init(&b, NULL);
    for (i = 0; i < sizeof vec / sizeof vec[0]; i++) {
        b.len = 0;
        ASBT_EQ_RES(asb_base64_encode(vec[i][0], strlen(vec[i][0]), &b), ASB_OK);
        ASBT_EQ_MEM(b.ptr, b.len, vec[i][1], strlen(vec[i][1]));
        b.len = 0;
        ASBT_EQ_RES(asb_base64_decode(vec[i][1], strlen(vec[i][1]), &b, NULL),
                    ASB_OK);
        ASBT_EQ_MEM(b.ptr, b.len, vec[i][0], strlen(vec[i][0]));
    }
    asb_buf_free(&b);
}

ASBT_TEST(base64_round_trips_binary_and_skips_line_breaks) {
    unsigned char data[300];
    asb_buf enc, dec, wrapped;
    size_t i;
    for (i = 0; i < sizeof data; i++) data[i] = (unsigned char)(i * 7 + 3);
    asb_buf_init(&enc, NULL);
    asb_buf_init(&dec, NULL);
    asb_buf_init(&wrapped, NULL);
    for (i = 0; i <= sizeof data; i++) {
        enc.len = dec.len = 0;
        ASBT_EQ_RES(asb_base64_encode(data, i, &enc), ASB_OK);
        ASBT_EQ_RES(asb_base64_decode(enc.ptr, enc.len, &dec, NULL), ASB_OK);
        ASBT_EQ_MEM(dec.ptr, dec.len, data, i);
    }
    for (i = 0; i < enc.len; i += 64) { /* PEM-style 64-column lines, CRLF */
        asb_buf_append(&wrapped, enc.ptr + i, enc.len - i < 64 ? enc.len - i : 64);
        asb_buf_append(&wrapped, "\r\n", 2);
    }
    dec.len = 0;
    ASBT_EQ_RES(asb_base64_decode(wrapped.ptr, wrapped.len, &dec, NULL), ASB_OK);
    ASBT_EQ_MEM(dec.ptr, dec.len, data, sizeof data);
    asb_buf_free(&enc);
    asb_buf_free(&dec);
    asb_buf_free(&wrapped);
}

ASBT_TEST(base64_rejects_garbage_padding_and_stray_bits) {
    static const char *bad[] = {"Zg=", "Zg", "Z===", "Zm9v!", "Zm 9v", "Zh==",
                                "Zm9=", "=Zg=", "Zg==Zg==", "Zg==x", "Zm8=\n="};
    size_t i;
    asb_buf b;
    asb_error err;
    asb_buf_init(&b, NULL);
    asb_buf_append(&b, "keep", 4);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (asb_base64_decode(bad[i], strlen(bad[i]), &b, &err) !=
            ASB_ERR_INVALID_ARGUMENT)
            fprintf(stderr, "    accepted: %s\n", bad[i]);
        ASBT_EQ_RES(asb_base64_decode(bad[i], strlen(bad[i]), &b, &err),
                    ASB_ERR_INVALID_ARGUMENT);
        ASBT_CONTAINS(err.message, "base64");
        ASBT_EQ_STR(b.ptr, "keep"); /* nothing half-appended */
    }
    asb_buf_free(&b);
}

ASBT_TEST(every_result_code_has_a_distinct_name) {
    static const asb_result codes[] = {
        ASB_OK, ASB_ERR_INVALID_ARGUMENT, ASB_ERR_OUT_OF_MEMORY, ASB_ERR_TOO_LARGE,
        ASB_ERR_TIMEOUT, ASB_ERR_CANCELLED, ASB_ERR_IO, ASB_ERR_CLOSED, ASB_ERR_DNS,
        ASB_ERR_CONNECT, ASB_ERR_SEND, ASB_ERR_RECV, ASB_ERR_PROXY,
        ASB_ERR_TLS_UNAVAILABLE, ASB_ERR_TLS_CONFIG, ASB_ERR_TLS_HANDSHAKE,
        ASB_ERR_TLS_VERIFY, ASB_ERR_HTTP_PROTOCOL, ASB_ERR_HTTP_STATUS,
        ASB_ERR_HTTP_REDIRECT, ASB_ERR_HTTP_SHORT_BODY, ASB_ERR_JSON_INVALID,
        ASB_ERR_JSON_TYPE, ASB_ERR_JSON_RANGE, ASB_ERR_JSON_NOT_FOUND,
        ASB_ERR_KUBECONFIG, ASB_ERR_CREDENTIALS, ASB_ERR_NOT_FOUND,
        ASB_ERR_KUBE_API, ASB_ERR_PORT_FORWARD, ASB_ERR_KUBECTL_MISSING,
        ASB_ERR_TEMPLATE_NOT_FOUND, ASB_ERR_WARMPOOL_NOT_FOUND,
        ASB_ERR_CLAIM_FAILED, ASB_ERR_METADATA};
    size_t i, j, n = sizeof codes / sizeof codes[0];
    for (i = 0; i < n; i++) {
        ASBT_CHECK(strncmp(asb_result_str(codes[i]), "ASB_", 4) == 0);
        ASBT_CHECK(strcmp(asb_result_str(codes[i]), "ASB_ERR_UNKNOWN") != 0);
        for (j = 0; j < i; j++)
            ASBT_CHECK(strcmp(asb_result_str(codes[i]), asb_result_str(codes[j])) != 0);
    }
    ASBT_EQ_STR(asb_result_str((asb_result)-3), "ASB_ERR_TOO_LARGE");
    ASBT_EQ_STR(asb_result_str((asb_result)-99), "ASB_ERR_UNKNOWN");
}

ASBT_TEST(version_and_tls_backend_are_reported) {
    char v[32];
    snprintf(v, sizeof v, "%d.%d.%d", ASB_VERSION_MAJOR, ASB_VERSION_MINOR,
             ASB_VERSION_PATCH);
    ASBT_EQ_STR(v, ASB_VERSION_STRING);
#if ASB_TLS
    ASBT_CONTAINS(asb_tls_backend(), "TLS");
#else
    ASBT_EQ_STR(asb_tls_backend(), "none");
#endif
}

ASBT_TEST(error_messages_quote_untrusted_bytes_boundedly) {
    char big[4000];
    asb_error err;
    memset(big, 'x', sizeof big);
    big[10] = '\x01';
    ASBT_EQ_RES(asb_label_validate_value(big, sizeof big, &err),
                ASB_ERR_INVALID_ARGUMENT);
    ASBT_CHECK(strlen(err.message) < 200);
    ASBT_CONTAINS(err.message, "...");
    ASBT_EQ_RES(asb_path_normalize(big, sizeof big, big, sizeof big, NULL, &err),
                ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "\\x01");
}

ASBT_TEST(gateway_addresses_are_an_ip_or_a_plain_hostname) {
    static const char *ok[] = {"10.0.0.1", "127.0.0.1", "2001:db8::1", "::1",
                               "gw.example.com", "a", "x-1.example", "A.B.C"};
    static const char *bad[] = {"evil.com/admin", "evil.com?redirect=1", "evil.com#frag",
                                "user@evil.com", "-bad.example.com", "host.example.",
                                "host..example.com", "host_name.com", "host name.com",
                                "host:8080", "host-.example.com", "host.-bad.com", "",
                                "2130706433", "0x7f000001", "0x7f.0x0.0x0.0x1", "0x.1",
                                "00.0x.0x.1", "127.1", "010.0.0.1", "host.123",
                                "[2001:db8::1]", "1.2.3.4:80"};
    char l254[260], label64[70];
    size_t i;
    asb_error err;
    for (i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        if (asb_gateway_address_validate(ok[i], strlen(ok[i]), &err) != ASB_OK)
            fprintf(stderr, "    refused %s: %s\n", ok[i], err.message);
        ASBT_EQ_RES(asb_gateway_address_validate(ok[i], strlen(ok[i]), &err), ASB_OK);
    }
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (asb_gateway_address_validate(bad[i], strlen(bad[i]), &err) == ASB_OK)
            fprintf(stderr, "    accepted %s\n", bad[i]);
        ASBT_EQ_RES(asb_gateway_address_validate(bad[i], strlen(bad[i]), &err),
                    ASB_ERR_INVALID_ARGUMENT);
    }
    memset(l254, 'a', 254);
    for (i = 63; i < 254; i += 64) l254[i] = '.';
    ASBT_EQ_RES(asb_gateway_address_validate(l254, 254, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_EQ_RES(asb_gateway_address_validate(l254, 253, &err), ASB_OK);
    memset(label64, 'b', 64);
    ASBT_EQ_RES(asb_gateway_address_validate(label64, 64, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_EQ_RES(asb_gateway_address_validate(label64, 63, &err), ASB_OK);
}

ASBT_TEST(chosen_claim_names_are_dns_subdomains) {
    asb_error err;
    char long254[255];
    static const char *good[] = {"a", "my-claim", "team.a.claim-1", "0x", "a-b.c-d"};
    static const char *bad[] = {"", "A", "-a", "a-", "a..b", ".a", "a.", "a.-b", "a-.b",
                                "a_b", "a b", "a/b"};
    size_t i;
    for (i = 0; i < sizeof good / sizeof good[0]; i++)
        ASBT_EQ_RES(asb_claim_name_validate(good[i], strlen(good[i]), &err), ASB_OK);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASBT_EQ_RES(asb_claim_name_validate(bad[i], strlen(bad[i]), &err),
                    ASB_ERR_INVALID_ARGUMENT);
        ASBT_CONTAINS(err.message, "claim name");
    }
    memset(long254, 'a', sizeof long254);
    ASBT_EQ_RES(asb_claim_name_validate(long254, 253, &err), ASB_OK);
    ASBT_EQ_RES(asb_claim_name_validate(long254, 254, &err), ASB_ERR_INVALID_ARGUMENT);
    ASBT_CONTAINS(err.message, "253");
    ASBT_EQ_RES(asb_claim_name_validate(NULL, 0, &err), ASB_ERR_INVALID_ARGUMENT);
}

ASBT_TEST(env_names_follow_the_kubernetes_rule) {
    asb_error err;
    static const char *good[] = {"PATH", "_x", "a.b-c_d", "-x", ".x", "x9", "a..b"};
    static const char *bad[] = {"", "9x", "a b", "a=b", ".", "..", "..x", "a/b", "\xc3\xa9"};
    size_t i;
    for (i = 0; i < sizeof good / sizeof good[0]; i++)
        ASBT_EQ_RES(asb_env_name_validate(good[i], strlen(good[i]), &err), ASB_OK);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ASBT_EQ_RES(asb_env_name_validate(bad[i], strlen(bad[i]), &err),
                    ASB_ERR_INVALID_ARGUMENT);
        ASBT_CONTAINS(err.message, "env: name");
    }
}

ASBT_LIST(
    ASBT_CASE(safe_paths_are_normalised_like_posix)
    ASBT_CASE(path_traversal_is_rejected_before_any_request)
    ASBT_CASE(empty_dot_and_directory_paths_name_no_file)
    ASBT_CASE(control_characters_are_rejected_before_normalising)
    ASBT_CASE(normalised_path_that_does_not_fit_is_too_large)
    ASBT_CASE(valid_label_keys_and_values_pass)
    ASBT_CASE(bad_label_keys_name_the_key_and_the_rule)
    ASBT_CASE(bad_label_values_name_the_value_and_its_key)
    ASBT_CASE(dns_labels_guard_names_that_go_into_headers)
    ASBT_CASE(claim_names_are_random_hex_with_the_prefix)
    ASBT_CASE(gateway_addresses_are_an_ip_or_a_plain_hostname)
    ASBT_CASE(ttl_becomes_a_utc_shutdown_time)
    ASBT_CASE(time_format_agrees_with_gmtime)
    ASBT_CASE(rfc3339_offsets_fractions_and_bad_dates)
    ASBT_CASE(percent_encoding_keeps_only_unreserved_bytes)
    ASBT_CASE(base64_matches_rfc4648_vectors)
    ASBT_CASE(base64_round_trips_binary_and_skips_line_breaks)
    ASBT_CASE(base64_rejects_garbage_padding_and_stray_bits)
    ASBT_CASE(every_result_code_has_a_distinct_name)
    ASBT_CASE(version_and_tls_backend_are_reported)
    ASBT_CASE(error_messages_quote_untrusted_bytes_boundedly)
    ASBT_CASE(chosen_claim_names_are_dns_subdomains)
    ASBT_CASE(env_names_follow_the_kubernetes_rule)
)
ASBT_MAIN()
