/* Runs a program and prints its peak resident set size (wait4's
   ru_maxrss), for the figure make test-static reports.
       peak_rss PROGRAM [ARGS...] */
#define _DEFAULT_SOURCE 1
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
int main(int argc, char **argv) {
    struct rusage ru; int st; pid_t p = fork();
    (void)argc;
    if (p == 0) { execv(argv[1], argv + 1); _exit(127); }
    wait4(p, &st, 0, &ru);
    fprintf(stderr, "peak RSS: %ld KiB\n", ru.ru_maxrss);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
