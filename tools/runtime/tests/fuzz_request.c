/* libFuzzer target for every parser in agentsandbox-runtime that reads
   untrusted bytes: the request head, percent decoding, the chunked decoder,
   the multipart parser, the /execute JSON reader, the command splitter and
   the SANDBOX_EXEC_TIMEOUT_SECONDS number reader.

   The first input byte picks the parser (and a split size, so framing is
   also fed across arbitrary read boundaries); the rest is its input. Each
   mode checks invariants, not just "no crash": spans stay inside their
   input, decoded bytes never outnumber encoded ones, escaped JSON is valid
   UTF-8 and exactly as long as predicted.

   Built with -DRT_FUZZ_REPLAY it gets a main() that replays files or
   directories of inputs without libFuzzer (make runtime-test runs the
   seed corpus that way under ASan+UBSan with gcc). */
#define RT_NO_MAIN
#include "../agentsandbox-runtime.c"

#define FZ_CHECK(cond) do { if (!(cond)) { fprintf(stderr, "invariant failed: %s (line %d)\n", #cond, __LINE__); abort(); } } while (0)

struct fz_mp {
    size_t parts, data;
    int in_part;
};

static int fz_begin(void *ctx, const struct rt_part_info *p)
{
    struct fz_mp *m = ctx;
    FZ_CHECK(!m->in_part);
    FZ_CHECK(p->name_len <= RT_MP_NAME_MAX && p->filename_len <= RT_MP_FILENAME_MAX);
    FZ_CHECK(!p->has_name || strlen(p->name) <= p->name_len);
    m->parts++;
    m->in_part = 1;
    return 0;
}

static int fz_data(void *ctx, const char *p, size_t n)
{
    struct fz_mp *m = ctx;
    volatile char sink = 0;
    FZ_CHECK(m->in_part);
    for (size_t i = 0; i < n; i++)
        sink = (char)(sink ^ p[i]); /* touch every byte: ASan checks the span */
    (void)sink;
    m->data += n;
    return 0;
}

static int fz_end(void *ctx)
{
    struct fz_mp *m = ctx;
    FZ_CHECK(m->in_part);
    m->in_part = 0;
    return 0;
}

static void fz_check_escape(const char *s, size_t n)
{
    size_t pos = 0, total = 0, predicted = rt_json_escaped_len(s, n);
    char out[64];
    while (pos < n) {
        size_t before = pos, w = rt_json_escape_step((const unsigned char *)s, n, &pos, out, sizeof out);
        FZ_CHECK(pos > before && w <= sizeof out);
        for (size_t i = 0; i < w;) {
            size_t k = rt_utf8_len((const unsigned char *)out + i, w - i);
            FZ_CHECK(k > 0);
            FZ_CHECK((unsigned char)out[i] >= 0x20); /* no raw control bytes in JSON */
            i += k;
        }
        total += w;
    }
    FZ_CHECK(total == predicted);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned mode, split;
    char *in;
    if (size < 1)
        return 0;
    mode = data[0] % 5;
    split = data[0] / 5 + 1;
    data++;
    size--;
    /* An exact-size heap copy, so any read past the end is an ASan report. */
    in = malloc(size ? size : 1);
    if (!in)
        return 0;
    if (size)
        memcpy(in, data, size);

    if (mode == 0) {
        struct rt_request req;
        char *end = size >= 4 ? memmem(in, size, "\r\n\r\n", 4) : NULL;
        size_t len = end ? (size_t)(end - in) + 4 : size;
        int st = rt_parse_head(in, len, &req);
        if (st == 0) {
            char *dec = malloc(req.target_len);
            long k;
            FZ_CHECK(dec && req.target >= in && req.target + req.target_len <= in + len);
            k = rt_percent_decode(req.target, req.target_len, dec);
            FZ_CHECK(k <= (long)req.target_len);
            if (req.content_type) {
                char b[80];
                size_t bl = 0;
                FZ_CHECK(req.content_type >= in && req.content_type + req.content_type_len <= in + len);
                if (rt_multipart_boundary(req.content_type, req.content_type_len, b, &bl) == 0)
                    FZ_CHECK(bl >= 1 && bl <= 70);
            }
            FZ_CHECK(!(req.chunked && req.has_content_length));
            free(dec);
        } else {
            FZ_CHECK(st >= 400 && st <= 505);
        }
    } else if (mode == 1) {
        struct rt_chunked st;
        size_t pos = 0, total = 0;
        int rc = RT_CHUNK_NEED;
        memset(&st, 0, sizeof st);
        while (pos < size && rc != RT_CHUNK_END && rc != RT_CHUNK_BAD) {
            size_t n = size - pos < split ? size - pos : split, used, off, dlen;
            rc = rt_chunked_step(&st, (const unsigned char *)in + pos, n, &used, &off, &dlen);
            FZ_CHECK(used <= n);
            if (rc == RT_CHUNK_DATA) {
                FZ_CHECK(off + dlen <= used && dlen > 0);
                total += dlen;
            }
            if (rc == RT_CHUNK_NEED)
                FZ_CHECK(used == n);
            pos += used;
        }
        FZ_CHECK(total <= size);
    } else if (mode == 2) {
        struct fz_mp m = {0, 0, 0};
        struct rt_multipart_cb cb = {fz_begin, fz_data, fz_end, &m};
        struct rt_multipart *mp = malloc(sizeof *mp);
        size_t pos = 0;
        int bad = 0;
        if (mp) {
            rt_multipart_init(mp, "b0undary", 8, &cb);
            while (pos < size && !bad) {
                size_t n = size - pos < split ? size - pos : split;
                bad = rt_multipart_feed(mp, in + pos, n) != 0;
                pos += n;
            }
            if (!bad && rt_multipart_finish(mp) == 0)
                FZ_CHECK(!m.in_part);
            if (bad)
                FZ_CHECK(mp->error != NULL);
            FZ_CHECK(m.data <= size);
            free(mp);
        }
    } else if (mode == 3) {
        struct rt_buf cmd = {0};
        const char *why;
        double limit = -1;
        int rc = rt_parse_execute_body((const unsigned char *)in, size, &cmd, &limit, &why);
        if (rc == RT_CMD_OK) {
            char **argv;
            size_t argc;
            /* no limit, or one within what the doc allows */
            FZ_CHECK(limit == 0 || (limit > 0 && limit <= 1e9));
            FZ_CHECK(cmd.len <= size);
            for (size_t i = 0; i < cmd.len;) { /* decoded command is valid UTF-8 */
                size_t k = rt_utf8_len((const unsigned char *)cmd.p + i, cmd.len - i);
                FZ_CHECK(k > 0);
                i += k;
            }
            if (rt_shlex_split(cmd.p, cmd.len, &argv, &argc, &why) == 0) {
                FZ_CHECK(argv[argc] == NULL);
                free(argv);
            }
        } else {
            FZ_CHECK(why != NULL);
        }
        rt_buf_free(&cmd);
    } else {
        char **argv;
        size_t argc;
        const char *why;
        if (rt_shlex_split(in, size, &argv, &argc, &why) == 0) {
            size_t chars = 0;
            for (size_t i = 0; i < argc; i++)
                chars += strlen(argv[i]);
            FZ_CHECK(chars <= size && argv[argc] == NULL);
            free(argv);
        } else {
            FZ_CHECK(why != NULL);
        }
        fz_check_escape(in, size);
        /* The same bytes as SANDBOX_EXEC_TIMEOUT_SECONDS (up to a NUL, as
           the environment holds them): Python's float() grammar. */
        {
            char *z = malloc(size + 1);
            double v;
            if (z) {
                memcpy(z, in, size);
                z[size] = 0;
                if (!rt_parse_py_float(z, &v))
                    FZ_CHECK(!isnan(v) || strcasestr(z, "nan"));
                free(z);
            }
        }
    }
    free(in);
    return 0;
}

#ifdef RT_FUZZ_REPLAY
static int fz_replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t len = 0, cap = 0, n;
    char chunk[65536];
    if (!f) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + n > cap) {
            cap = (len + n) * 2;
            buf = realloc(buf, cap);
            if (!buf)
                abort();
        }
        memcpy(buf + len, chunk, n);
        len += n;
    }
    fclose(f);
    LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
    free(buf);
    return 0;
}

int main(int argc, char **argv)
{
    int files = 0;
    for (int i = 1; i < argc; i++) {
        DIR *d = opendir(argv[i]);
        if (!d) {
            if (fz_replay_file(argv[i]))
                return 1;
            files++;
            continue;
        }
        for (struct dirent *e; (e = readdir(d));) {
            char p[PATH_MAX];
            if (e->d_name[0] == '.')
                continue;
            snprintf(p, sizeof p, "%s/%s", argv[i], e->d_name);
            if (fz_replay_file(p))
                return 1;
            files++;
        }
        closedir(d);
    }
    printf("replayed %d inputs\n", files);
    return files ? 0 : 1;
}
#endif
