/* What every fuzz target shares: FUZZ_REQUIRE, and a replay main that,
   without libFuzzer, runs every file named on the command line (or found
   in a named directory) through LLVMFuzzerTestOneInput, so the corpus is
   a regression test anywhere. */
#ifndef FUZZ_MAIN_H
#define FUZZ_MAIN_H
#include <stdio.h>
#include <stdlib.h>

/* A property a target checks on every input: a failure aborts, so
   libFuzzer (or the replay, under ASan) reports it with the input;
   make fuzz greps its logs for "property failed". */
#define FUZZ_REQUIRE(cond)                                                   \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "%s:%d: property failed: %s\n", __FILE__,        \
                    __LINE__, #cond);                                        \
            abort();                                                         \
        }                                                                    \
    } while (0)

#ifdef ASB_FUZZ_REPLAY
#include <dirent.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int fuzz_replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    unsigned char *buf;
    long n;
    size_t got;
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = (unsigned char *)malloc((size_t)n + 1);
    got = fread(buf, 1, (size_t)n, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, got);
    free(buf);
    return 1;
}

int main(int argc, char **argv) {
    int i, count = 0;
    for (i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) continue;
        if (S_ISDIR(st.st_mode)) {
            DIR *d = opendir(argv[i]);
            struct dirent *e;
            char path[4096];
            while (d && (e = readdir(d)) != NULL) {
                if (e->d_name[0] == '.') continue;
                snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
                count += fuzz_replay_file(path);
            }
            if (d) closedir(d);
        } else {
            count += fuzz_replay_file(argv[i]);
        }
    }
    printf("replayed %d inputs\n", count);
    return count > 0 ? 0 : 1;
}
#endif
#endif
