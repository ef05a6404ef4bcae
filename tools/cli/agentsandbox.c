/* agentsandbox: a command-line tool for agent sandboxes, built on the public
   API of agentsandbox.h only (it is the library's first real user: where it
   had to work around the API, the comment says so).

   Spelled like kubectl on purpose: global flags (--kubeconfig, --context,
   -n/--namespace, -o, -v) mean what they mean there, so a kubectl user
   needs no manual. `agentsandbox --help` and `agentsandbox CMD --help`
   are the manual; tools/cli/README.md has a session and the exit codes. */
#define AGENTSANDBOX_IMPLEMENTATION
#include "../../agentsandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <sys/ioctl.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif
#include <termios.h>
#include <unistd.h>

/* Exit codes: documented in usage() and the README; tests check them. */
enum {
    EXIT_FAIL = 1,       /* anything not below (RBAC refusal, bad answer) */
    EXIT_USAGE = 2,      /* bad flags or arguments: nothing was sent */
    EXIT_NOTFOUND = 3,   /* claim, template, warm pool or file missing */
    EXIT_TIMEOUT = 4,    /* a deadline (--timeout) passed */
    EXIT_CONNECT = 5,    /* apiserver, kubeconfig, kubectl or router unreachable */
    EXIT_CANCELLED = 130 /* SIGINT, SIGTERM, SIGHUP or SIGQUIT; whatever run created is deleted */
};

#define MAX_LIST 64

typedef struct cli {
    /* global flags */
    const char *kubeconfig;
    const char *context;
    const char *ns; /* NULL: the context's namespace */
    const char *connect;
    const char *router_ns;
    const char *output; /* NULL (table), "json", "name" */
    int verbosity;
    /* per-command flags (shared table; each command reads its own) */
    asb_label labels[MAX_LIST];
    size_t label_count;
    asb_env_var env[MAX_LIST];
    size_t env_count;
    const char *selector;
    const char *name;
    const char *warm_pool;
    int64_t ttl_s;
    int timeout_ms;
    int all_namespaces;
    int all;
    int recursive;
    int stdin_fwd; /* exec -i */
    int tty;       /* exec -t */
    int help;
    int file_op; /* a file call is in flight: a 404 is about the file */
    /* positionals, then argv after "--" */
    char **pos;
    int npos;
    char **cmd;
    int ncmd;
    /* state */
    const char *sub;
    asb_client *client;
    asb_kube_client *kube; /* the client's (asb_client_kube): borrowed */
    asb_cancel *cancel;
    char url_buf[600];
    char gw_buf[300];
} cli;

static volatile sig_atomic_t g_signal;
static asb_cancel *g_cancel;
/* Triggered by a second SIGINT or SIGTERM: the cleanup the first one
   left running (run's delete of its claim, or the delete of the claim a
   cancelled create made) stops waiting, as kubectl and docker stop at a
   second Ctrl-C. */
static asb_cancel *g_cancel_again;
/* Set once that cleanup has begun: only a signal that finds it set (and
   one before it) stops the cleanup. Two quick Ctrl-Cs during the command
   used to trigger g_cancel_again before the delete began, so the delete
   was refused before a byte went out. */
static volatile sig_atomic_t g_cleanup;
/* Set while a create runs: a cancelled create deletes its claim inside
   the library (asb_create_opts.cleanup_cancel), where the tool cannot
   see the delete begin, so any second signal during it stops the delete.
   Two signals at once then leave the claim, which the tool names. */
static volatile sig_atomic_t g_creating;
/* The process's umask, read once in main (umask(2) only reads by
   writing: done there, before any thread exists). */
static mode_t g_umask;

static void on_signal(int sig) {
    if (g_signal && (g_cleanup || g_creating)) asb_cancel_trigger(g_cancel_again);
    g_signal = sig;
    asb_cancel_trigger(g_cancel); /* one write(2): async-signal-safe */
}

/* ---- help ------------------------------------------------------------------- */

static const char *const USAGE =
    "agentsandbox: agent sandboxes (kubernetes-sigs/agent-sandbox) from the shell\n"
    "\n"
    "Usage: agentsandbox [global flags] COMMAND [flags] [args]\n"
    "\n"
    "Commands:\n"
    "  create TEMPLATE      create a sandbox claim, wait until Ready, print its name\n"
    "  get, status CLAIM... show claims and whether their sandbox is Ready\n"
    "  ls                   list the claims of a namespace (-l selector, -A)\n"
    "  rm CLAIM...          delete claims (or -l selector, or --all); prints each one\n"
    "  exec CLAIM -- CMD... run a command, print its output, exit with its code\n"
    "  cp [-r] SRC DST      copy files; one side is CLAIM:PATH\n"
    "  cat CLAIM PATH...    print files from the sandbox\n"
    "  ls-files CLAIM [DIR] list a directory in the sandbox\n"
    "  stat CLAIM PATH      one file's type, size and time\n"
    "  run TEMPLATE -- CMD  create, exec, delete (deleted on Ctrl-C, SIGTERM, SIGHUP too)\n"
    "  version              print the version of the tool and the library\n"
    "  completion bash|zsh  print a shell completion script\n"
    "\n"
    "Global flags (as kubectl spells them):\n"
    "  --kubeconfig FILE    kubeconfig to use (default $KUBECONFIG, ~/.kube/config)\n"
    "  --context NAME       kubeconfig context (default: its current-context)\n"
    "  -n, --namespace NS   namespace (default: the context's, else \"default\")\n"
    "  --connect MODE       how to reach sandboxes: tunnel (default: kubectl\n"
    "                       port-forward to the router), native (the same\n"
    "                       port-forward from inside the tool: no kubectl),\n"
    "                       direct=URL, gateway=NAME[/NS], in-cluster\n"
    "  --router-namespace NS  the router's namespace (default agent-sandbox-system)\n"
    "  -o, --output FORMAT  json, yaml, name, or wide (get, ls: more columns);\n"
    "                       default: a table or plain names. Text from the\n"
    "                       cluster or a sandbox is printed with control\n"
    "                       characters escaped (\\xHH, \\uHHHH)\n"
    "  -v, -v=N, --v=N      log to stderr: 1 lifecycle (create, delete, tunnel),\n"
    "                       2 and up also each sandbox call; never a credential\n"
    "  -h, --help           help; `agentsandbox COMMAND --help` for a command\n"
    "\n"
    "Exit codes:\n"
    "  0    success\n"
    "  1    failure not listed below (e.g. RBAC refused, a bad answer)\n"
    "  2    usage error: bad flag or argument; nothing was sent\n"
    "  3    not found: claim, template, warm pool or file\n"
    "  4    timeout: a deadline (--timeout) passed\n"
    "  5    connection: kubeconfig, apiserver, kubectl or router unreachable\n"
    "  130  cancelled by SIGINT, SIGTERM, SIGHUP or SIGQUIT (run: a second one\n"
    "       stops waiting for the claim's delete and names the claim that\n"
    "       may be left)\n"
    "  exec and run exit with the remote command's own code once it ran\n"
    "  (minus a signal number: 128 + it, as a shell; outside 0-255: 255).\n";

typedef struct cmd_help {
    const char *name;
    const char *text;
} cmd_help;

static const cmd_help HELPS[] = {
    {"create",
     "Usage: agentsandbox create TEMPLATE [flags]\n"
     "       agentsandbox create --warm-pool POOL [flags]   (agent-sandbox v0.5+)\n"
     "Creates a SandboxClaim, waits until its sandbox is Ready, prints the claim name.\n"
     "SIGINT or SIGTERM while waiting deletes the claim (exit 130); a second one\n"
     "stops waiting for that delete, naming the claim that may be left.\n"
     "  --name NAME          the claim's name (default sandbox-claim-XXXXXXXX)\n"
     "  --label K=V          a label on the claim (repeatable)\n"
     "  --env K=V            an environment variable in the sandbox (repeatable;\n"
     "                       v0.5+, the template must allow it); --env K takes\n"
     "                       K's value from this environment: a secret never\n"
     "                       shows in the process list (but it is stored in\n"
     "                       the claim and the pod, in clear, for whoever may\n"
     "                       get them)\n"
     "  --ttl DURATION       delete the sandbox after this long (e.g. 90s, 10m, 2h)\n"
     "  --timeout DURATION   wait at most this long for Ready (default 3m)\n"
     "  --warm-pool POOL     v0.5+: claim from this SandboxWarmPool (no TEMPLATE);\n"
     "                       with a TEMPLATE on v0.4: the warmpool policy\n"
     "  -o json|yaml|name    print an object or sandboxclaim/NAME\n"},
    {"get",
     "Usage: agentsandbox get CLAIM... [-o json|yaml|name|wide]   (alias: status)\n"
     "Shows each claim: its sandbox, Ready and why not, template, age.\n"
     "-o json and -o yaml print the claim object (a List for several); -o wide\n"
     "adds the creation time and the Ready condition's message.\n"},
    {"ls",
     "Usage: agentsandbox ls [-l SELECTOR] [-A] [-o json|yaml|name|wide]\n"
     "Lists claims in the namespace (-A: every namespace).\n"
     "  -l, --selector SEL   label selector, e.g. team=a,env!=prod\n"
     "  -A, --all-namespaces every namespace\n"},
    {"rm",
     "Usage: agentsandbox rm CLAIM... | -l SELECTOR | --all\n"
     "Deletes claims (their sandboxes go with them), printing each one deleted.\n"
     "A missing claim is reported (exit 3); the others are still deleted.\n"
     "SIGINT or SIGTERM stops at the claim being deleted (exit 130), naming it\n"
     "and every claim not tried.\n"
     "  -l, --selector SEL   every claim matching the selector\n"
     "  --all                every claim in the namespace\n"},
    {"exec",
     "Usage: agentsandbox exec CLAIM [-i] [-t] [--timeout DURATION] -- CMD [ARG...]\n"
     "Runs CMD in the sandbox (arguments kept apart, as a shell would quote them;\n"
     "use `-- sh -c '...'` for pipes), prints its stdout and stderr and exits\n"
     "with its exit code. On a sandboxd sandbox (agent-sandbox v0.5+ sandboxd\n"
     "template) the output streams as it comes; on the legacy runtime it comes\n"
     "when the command ends (its HTTP /execute answers then).\n"
     "  --timeout DURATION   the command's deadline (default: 60s on the legacy\n"
     "                       runtime, none on sandboxd)\n"
     "  -i, --stdin          sandboxd: forward stdin (EOF closes the process's)\n"
     "  -t, --tty            sandboxd: a terminal, sized as this one and resized\n"
     "                       with it (SIGWINCH); keys, ^C and ^D go to the sandbox\n"
     "  Without -t, Ctrl-C ends the remote process (exit 130). -i and -t on the\n"
     "  legacy runtime fail before anything runs (exit 2). A process ended by a\n"
     "  signal exits 255 (sandboxd does not say which).\n"},
    {"cp",
     "Usage: agentsandbox cp [-r] LOCAL CLAIM:PATH\n"
     "       agentsandbox cp [-r] CLAIM:PATH LOCAL     (LOCAL - : stdout)\n"
     "Copies a file, or with -r a directory (DST becomes a copy of SRC; empty\n"
     "directories are not copied up), streamed: a progress bar (bytes, rate,\n"
     "ETA) on a terminal, nothing when stderr is piped. A download goes to a\n"
     "temporary file renamed into place, so a failed copy leaves no half file;\n"
     "it gets the mode a new file gets (0666 less the umask), or the permission\n"
     "bits of a file of yours it replaces (never setuid, setgid or sticky).\n"
     "cp -r stops (exit 1) past 256 directories below SRC; down, also past\n"
     "1,000,000 files and directories listed. Below LOCAL it never goes through\n"
     "a symlink (LOCAL itself may be one): up, links are skipped; down, a link\n"
     "where a file or directory goes (planted by another user of a directory\n"
     "like /tmp) is not written through, that entry is skipped and named, the\n"
     "rest copied, exit 1. A name with control characters is skipped and\n"
     "named, both ways, the rest copied, exit 1. Up, an entry that turns from\n"
     "file to directory (or back) while being copied is named and not copied,\n"
     "exit 1. A file that cannot be read, either way (gone since its directory\n"
     "was listed, a name the sandbox cannot serve back, or refused: 404/403\n"
     "down, ENOENT/EACCES up), is named and not copied, the rest is; the exit\n"
     "code is then 3 if one was not found, else 1. A failure that is not one\n"
     "file's (Ctrl-C, the claim or connection gone, a timeout, a router 5xx,\n"
     "a local write such as a full disk) stops the copy at once, with its\n"
     "own exit code. A hard link goes up as the file it is: where\n"
     "fs.protected_hardlinks is 0, another user who can write to the tree can\n"
     "link a file of yours into it, so copy up only trees others cannot write\n"
     "to.\n"
     "  -r, --recursive      copy a directory tree\n"
     "  --timeout DURATION   each file's deadline (default none)\n"},
    {"ls-files",
     "Usage: agentsandbox ls-files CLAIM [PATH] [-o json|yaml|name]\n"
     "Lists a directory in the sandbox (default: its working directory).\n"},
    {"stat",
     "Usage: agentsandbox stat CLAIM PATH [-o json|yaml]\n"
     "Shows one file or directory: type, size, modification time (exit 3 if\n"
     "it is not there).\n"},
    {"cat",
     "Usage: agentsandbox cat CLAIM PATH...\n"
     "Writes the files to stdout, streamed.\n"},
    {"run",
     "Usage: agentsandbox run TEMPLATE [create flags] -- CMD [ARG...]\n"
     "Creates a sandbox, runs CMD, deletes the sandbox, exits with CMD's code.\n"
     "The claim is deleted on SIGINT, SIGTERM, SIGHUP (the terminal closed) and\n"
     "SIGQUIT too (exit 130), unless they were ignored when it started. A second\n"
     "SIGINT or SIGTERM stops waiting for that delete (an apiserver that does\n"
     "not answer): the claim that may be left is named with the command that\n"
     "deletes it, exit 130.\n"
     "Flags: those of create; --timeout is the command's deadline.\n"},
    {"completion",
     "Usage: agentsandbox completion bash|zsh\n"
     "Prints a completion script: commands, flags, and claim names from the\n"
     "cluster. bash: source <(agentsandbox completion bash)\n"
     "zsh:  source <(agentsandbox completion zsh)\n"},
    {"version",
     "Usage: agentsandbox version [-o json|yaml]\n"
     "Prints the tool's version, the library's and its TLS backend.\n"},
};

static const char *help_for(const char *sub) {
    size_t i;
    if (strcmp(sub, "status") == 0) sub = "get";
    for (i = 0; i < sizeof HELPS / sizeof HELPS[0]; i++)
        if (strcmp(HELPS[i].name, sub) == 0) return HELPS[i].text;
    return NULL;
}

/* ---- untrusted text ----------------------------------------------------------- */

/* Names, reasons and messages come from the apiserver, the controller and
   the sandbox itself; a hostile sandbox names a file "\033]0;...\007" and
   whoever runs ls-files has their terminal retitled, recoloured or worse.
   So everything the tool prints that it did not write itself goes through
   safe(): C0 controls, DEL, bytes that are not UTF-8 (a raw 0x9b is CSI
   on a terminal in an 8-bit mode) become \xHH; UTF-8-encoded C1 controls
   (U+0080..U+009F, CSI as U+009B), the bidirectional controls that
   reorder what is shown, the separators that break a line where none
   is seen and the invisible characters that make two names look alike
   (shown_escaped) become \uHHHH.
   Printable UTF-8 is kept, a backslash too: the point is a terminal that
   stays inert, not a name that round-trips (the library's own messages
   already show a path's control bytes as \xHH; -o json has the exact
   bytes). Applied on terminals and pipes alike: a script reading the
   output gets the same line a person sees (-o json is escaped as JSON
   instead: write_json_text). */

/* Length of the UTF-8 sequence at p (shortest form, no surrogates, at
   most U+10FFFF) and its code point; 0 when it is not one. */
static size_t utf8_seq(const unsigned char *p, size_t n, uint32_t *cp) {
    size_t len, i;
    uint32_t v;
    if (p[0] < 0x80) return (*cp = p[0]), 1;
    if (p[0] >= 0xc2 && p[0] <= 0xdf) len = 2, v = p[0] & 0x1fu;
    else if (p[0] >= 0xe0 && p[0] <= 0xef) len = 3, v = p[0] & 0x0fu;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4) len = 4, v = p[0] & 0x07u;
    else return 0;
    if (n < len) return 0;
    for (i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        v = (v << 6) | (p[i] & 0x3fu);
    }
    if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10ffff)) ||
        (v >= 0xd800 && v <= 0xdfff))
        return 0;
    *cp = v;
    return len;
}

/* A code point a terminal would act on rather than show: C1 controls;
   the bidi marks and controls (ALM U+061C, LRM/RLM U+200E/U+200F, the
   embeddings and overrides U+202A..U+202E, the isolates U+2066..U+2069),
   any of which makes a name display as another; and the line and
   paragraph separators U+2028/U+2029, which split one line of output in
   two for the eye (and for some readers); and the invisible ones that
   make two names look the same: the soft hyphen U+00AD, the Mongolian
   vowel separator U+180E, the zero-width space U+200B, the word joiner
   and invisible operators U+2060..U+2064, the deprecated format
   controls U+206A..U+206F and the zero-width no-break space U+FEFF. The
   zero-width (non-)joiners U+200C/U+200D stay: scripts and emoji
   sequences need them, and they join only what is visible. */
static int shown_escaped(uint32_t cp) {
    return (cp >= 0x80 && cp <= 0x9f) || cp == 0xad || cp == 0x61c || cp == 0x180e ||
           cp == 0x200b || cp == 0x200e || cp == 0x200f || cp == 0x2028 || cp == 0x2029 ||
           (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2060 && cp <= 0x2064) ||
           (cp >= 0x2066 && cp <= 0x206f) || cp == 0xfeff;
}

/* The escaped text of s[0, n) into out (always NUL-terminated; cut at a
   whole escape when it does not fit). Returns out. */
static char *safe_text_to(char *out, size_t cap, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, o = 0;
    if (!cap) return out;
    while (s && i < n) {
        char esc[16];
        uint32_t cp = 0;
        size_t len = utf8_seq(u + i, n - i, &cp), elen;
        if (len == 1 && cp >= 0x20 && cp < 0x7f) {
            esc[0] = (char)cp;
            elen = 1;
        } else if (len == 1 || len == 0) { /* C0, DEL, not UTF-8 */
            elen = (size_t)snprintf(esc, sizeof esc, "\\x%02x", u[i]);
            len = 1;
        } else if (shown_escaped(cp)) {
            elen = (size_t)snprintf(esc, sizeof esc, "\\u%04x", (unsigned)cp);
        } else {
            memcpy(esc, s + i, len);
            elen = len;
        }
        if (o + elen >= cap) break;
        memcpy(out + o, esc, elen);
        o += elen;
        i += len;
    }
    out[o] = '\0';
    return out;
}

/* safe_text of a NUL-terminated string, in one of eight rotating buffers
   (the tool is single-threaded): enough for every argument of one printf.
   NULL prints as "". */
static const char *safe(const char *s) {
    static char *ring[8];
    static size_t caps[8];
    static unsigned next;
    unsigned k = next++ % 8;
    size_t n = s ? strlen(s) : 0, need = n * 6 + 1; /* \u009b: 6 from 2 bytes; \x: 4 from 1 */
    if (caps[k] < need) {
        char *p = (char *)realloc(ring[k], need);
        if (!p) return "<out of memory>";
        ring[k] = p;
        caps[k] = need;
    }
    return safe_text_to(ring[k], caps[k], s, n);
}

/* ---- errors ----------------------------------------------------------------- */

/* vprintf into a buffer, so the whole line (arguments from the cluster
   among them) goes through safe(). Longer lines are cut. */
static const char *safe_vfmt(const char *fmt, va_list ap) {
    char line[2048];
    vsnprintf(line, sizeof line, fmt, ap);
    return safe(line);
}

static int usage_error(const cli *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "agentsandbox: %s", safe_vfmt(fmt, ap));
    va_end(ap);
    fprintf(stderr, "\nTry 'agentsandbox %s%s--help'.\n", c->sub ? c->sub : "", c->sub ? " " : "");
    return EXIT_USAGE;
}

/* The remote command's exit code as ours: 0-255 as it is; minus a signal
   number (the legacy runtime's Python reports a signal so) as a shell
   reports one, 128 + the signal; anything else 255. Never 0 for a code
   that is not: `& 0xff` made a runtime's 256 a success. */
static int remote_exit_code(int code) {
    if (code >= 0 && code <= 255) return code;
    if (code < 0 && code >= -127) return 128 - code;
    return 255;
}

static int exit_code_for(asb_result r, const asb_error *e) {
    switch (r) {
    case ASB_OK: return 0;
    case ASB_ERR_INVALID_ARGUMENT: return EXIT_USAGE;
    case ASB_ERR_NOT_FOUND:
    case ASB_ERR_TEMPLATE_NOT_FOUND:
    case ASB_ERR_WARMPOOL_NOT_FOUND:
    case ASB_ERR_METADATA: return EXIT_NOTFOUND;
    case ASB_ERR_HTTP_STATUS: return e && e->http_status == 404 ? EXIT_NOTFOUND : EXIT_FAIL;
    case ASB_ERR_TIMEOUT: return EXIT_TIMEOUT;
    case ASB_ERR_CANCELLED: return EXIT_CANCELLED;
    case ASB_ERR_DNS:
    case ASB_ERR_CONNECT:
    case ASB_ERR_SEND:
    case ASB_ERR_RECV:
    case ASB_ERR_PROXY:
    case ASB_ERR_TLS_UNAVAILABLE:
    case ASB_ERR_TLS_CONFIG:
    case ASB_ERR_TLS_HANDSHAKE:
    case ASB_ERR_TLS_VERIFY:
    case ASB_ERR_KUBECONFIG:
    case ASB_ERR_CREDENTIALS:
    case ASB_ERR_PORT_FORWARD:
    case ASB_ERR_KUBECTL_MISSING: return EXIT_CONNECT;
    default: return EXIT_FAIL;
    }
}

/* What to try next, by what failed. */
static const char *hint_for(const cli *c, asb_result r, const asb_error *e) {
    switch (r) {
    case ASB_ERR_NOT_FOUND:
        if (c->file_op && e && e->http_status == 404)
            return "no such file: list the directory with `agentsandbox exec CLAIM -- ls -la DIR`";
        /* fall through */
    case ASB_ERR_METADATA:
        return "list the claims with `agentsandbox ls` (add -n NAMESPACE or -A)";
    case ASB_ERR_TEMPLATE_NOT_FOUND:
        return "list templates with `kubectl get sandboxtemplates -n NAMESPACE`";
    case ASB_ERR_WARMPOOL_NOT_FOUND:
        return "list pools with `kubectl get sandboxwarmpools -n NAMESPACE`";
    case ASB_ERR_TIMEOUT: return "raise --timeout, or look at the pod with kubectl describe";
    case ASB_ERR_KUBECONFIG:
        return "pass --kubeconfig FILE or set KUBECONFIG; check --context";
    case ASB_ERR_CREDENTIALS:
        return "check the kubeconfig user's credentials (kubectl auth whoami)";
    case ASB_ERR_DNS:
    case ASB_ERR_CONNECT:
    case ASB_ERR_SEND:
    case ASB_ERR_RECV:
        return "is the cluster up? try `kubectl cluster-info` with the same flags";
    case ASB_ERR_TLS_HANDSHAKE:
    case ASB_ERR_TLS_VERIFY:
    case ASB_ERR_TLS_CONFIG: return "check the CA and certificates in the kubeconfig";
    case ASB_ERR_KUBECTL_MISSING:
        return "install kubectl, or reach the router another way: --connect direct=URL";
    case ASB_ERR_PORT_FORWARD:
        return c->router_ns ? "check the router Service in --router-namespace"
                            : "check the router: kubectl -n agent-sandbox-system get svc";
    case ASB_ERR_CLAIM_FAILED:
        return "the controller refused the claim (it was deleted): see the reason above";
    case ASB_ERR_INVALID_ARGUMENT:
        if (e && strstr(e->message, "v1beta1 claims name a warm pool"))
            return "agent-sandbox v0.5+ claims from a pool: use --warm-pool POOL "
                   "(kubectl get sandboxwarmpools)";
        return NULL;
    case ASB_ERR_KUBE_API:
        if (e && e->http_status == 403) return "RBAC refused it: ask for the permission";
        if (e && e->http_status == 409) return "the name is taken: pick another --name";
        return NULL;
    case ASB_ERR_HTTP_STATUS:
        if (e && e->http_status == 404) return "list the directory with `agentsandbox exec CLAIM -- ls DIR`";
        if (e && (e->http_status == 502 || e->http_status == 503))
            return "the router could not reach the sandbox: is its pod Ready?";
        return NULL;
    default: return NULL;
    }
}

/* "agentsandbox: <what> <object>: <message>" then a hint line. */
static int fail(const cli *c, asb_result r, const asb_error *e, const char *fmt, ...) {
    va_list ap;
    const char *hint = hint_for(c, r, e);
    va_start(ap, fmt);
    fprintf(stderr, "agentsandbox: %s", safe_vfmt(fmt, ap));
    va_end(ap);
    /* the message may quote the server (a Status message, a body) */
    fprintf(stderr, ": %s", e && e->message[0] ? safe(e->message) : asb_result_str(r));
    if (e && r == ASB_ERR_HTTP_STATUS && e->http_status)
        fprintf(stderr, " (HTTP %d)", e->http_status);
    fprintf(stderr, " [%s]\n", asb_result_str(r));
    if (hint) fprintf(stderr, "  hint: %s\n", hint);
    return exit_code_for(r, e);
}

/* ---- logging ---------------------------------------------------------------- */

static void log_line(void *ud, const asb_log_record *rec) {
    static const char *const names[] = {"debug", "info", "warn", "error"};
    /* records never carry a credential (the library's rule); they may
       quote the server. Local buffers, not safe()'s ring: the library may
       log from its own threads (HTTP/2 I/O). */
    char id[128], msg[4096];
    (void)ud;
    fprintf(stderr, "agentsandbox: %s %s: %s\n",
            rec->level <= ASB_LOG_ERROR ? names[rec->level] : "?",
            safe_text_to(id, sizeof id, rec->id, rec->id ? strlen(rec->id) : 0),
            safe_text_to(msg, sizeof msg, rec->message, rec->message ? strlen(rec->message) : 0));
}

/* ---- flag parsing ----------------------------------------------------------- */

/* "90", "90s", "1500ms", "10m", "2h" -> milliseconds; -1 when bad. */
static int64_t parse_duration_ms(const char *s) {
    char *end;
    long long v;
    int64_t mul = 1000;
    if (!s || !*s || *s == '-' || *s == '+') return -1;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno || end == s) return -1;
    if (strcmp(end, "") == 0 || strcmp(end, "s") == 0) mul = 1000;
    else if (strcmp(end, "ms") == 0) mul = 1;
    else if (strcmp(end, "m") == 0) mul = 60000;
    else if (strcmp(end, "h") == 0) mul = 3600000;
    else return -1;
    if (v > (long long)(INT64_MAX / 3600000)) return -1;
    return (int64_t)v * mul;
}

static int split_kv(char *s, const char **k, const char **v) {
    char *eq = strchr(s, '=');
    if (!eq || eq == s) return -1;
    *eq = '\0';
    *k = s;
    *v = eq + 1;
    return 0;
}

/* The value of a flag: "--flag=value" or "--flag value". Returns NULL
   (and reports) when it is missing. */
static const char *flag_value(cli *c, char **argv, int argc, int *i, const char *arg, size_t nlen,
                              int *rc) {
    if (arg[nlen] == '=') return arg + nlen + 1;
    if (*i + 1 < argc) return argv[++*i];
    *rc = usage_error(c, "flag %s needs a value", arg);
    return NULL;
}

static int is_flag(const char *arg, const char *name, size_t *nlen) {
    size_t n = strlen(name);
    if (strncmp(arg, name, n) != 0 || (arg[n] != '\0' && arg[n] != '=')) return 0;
    *nlen = n;
    return 1;
}

/* Global and command flags may appear anywhere before "--", as in kubectl. */
static int parse_args(cli *c, int argc, char **argv) {
    int i, rc = 0;
    c->pos = (char **)calloc((size_t)argc + 1, sizeof(char *));
    if (!c->pos) return usage_error(c, "out of memory");
    for (i = 1; i < argc; i++) {
        char *a = argv[i];
        const char *v;
        size_t n;
        if (strcmp(a, "--") == 0) {
            c->cmd = argv + i + 1;
            c->ncmd = argc - i - 1;
            break;
        }
        if (a[0] != '-' || a[1] == '\0') { /* "-" is a positional (stdout) */
            if (!c->sub) c->sub = a;
            else c->pos[c->npos++] = a;
            continue;
        }
#define VALUE(field)                                              \
    do {                                                          \
        v = flag_value(c, argv, argc, &i, a, n, &rc);             \
        if (!v) return rc;                                        \
        c->field = v;                                             \
    } while (0)
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) c->help = 1;
        else if (is_flag(a, "--kubeconfig", &n)) VALUE(kubeconfig);
        else if (is_flag(a, "--context", &n)) VALUE(context);
        else if (is_flag(a, "--namespace", &n) || is_flag(a, "-n", &n)) VALUE(ns);
        else if (is_flag(a, "--connect", &n)) VALUE(connect);
        else if (is_flag(a, "--router-namespace", &n)) VALUE(router_ns);
        else if (is_flag(a, "--output", &n) || is_flag(a, "-o", &n)) {
            VALUE(output);
            if (strcmp(c->output, "json") != 0 && strcmp(c->output, "yaml") != 0 &&
                strcmp(c->output, "name") != 0 && strcmp(c->output, "wide") != 0)
                return usage_error(c, "-o %s: the formats are json, yaml, name and wide",
                                   c->output);
        } else if (strcmp(a, "-v") == 0) c->verbosity = 1;
        else if (strcmp(a, "-vv") == 0) c->verbosity = 2;
        else if (strncmp(a, "-v=", 3) == 0 || strncmp(a, "--v=", 4) == 0) {
            const char *num = strchr(a, '=') + 1;
            char *end;
            long lv = strtol(num, &end, 10);
            if (!*num || *end || lv < 0 || lv > 10)
                return usage_error(c, "%s: the level is a number from 0 to 10", a);
            c->verbosity = (int)lv;
        } else if (is_flag(a, "--selector", &n) || is_flag(a, "-l", &n)) VALUE(selector);
        else if (is_flag(a, "--name", &n)) VALUE(name);
        else if (is_flag(a, "--warm-pool", &n)) VALUE(warm_pool);
        else if (strcmp(a, "-A") == 0 || strcmp(a, "--all-namespaces") == 0) c->all_namespaces = 1;
        else if (strcmp(a, "--all") == 0) c->all = 1;
        else if (strcmp(a, "-r") == 0 || strcmp(a, "--recursive") == 0) c->recursive = 1;
        else if (strcmp(a, "-i") == 0 || strcmp(a, "--stdin") == 0) c->stdin_fwd = 1;
        else if (strcmp(a, "-t") == 0 || strcmp(a, "--tty") == 0) c->tty = 1;
        else if (strcmp(a, "-it") == 0 || strcmp(a, "-ti") == 0) c->stdin_fwd = c->tty = 1;
        else if (is_flag(a, "--ttl", &n) || is_flag(a, "--timeout", &n)) {
            int64_t ms;
            int is_ttl = a[2] == 't' && a[3] == 't';
            v = flag_value(c, argv, argc, &i, a, n, &rc);
            if (!v) return rc;
            ms = parse_duration_ms(v);
            if (ms <= 0 || ms > (int64_t)INT32_MAX)
                return usage_error(c, "%.*s %s: a duration is a positive number with s, m or h "
                                      "(e.g. 90s, 10m)", (int)n, a, v);
            if (is_ttl) c->ttl_s = (ms + 999) / 1000;
            else c->timeout_ms = (int)ms;
        } else if (is_flag(a, "--label", &n) || is_flag(a, "--env", &n)) {
            int is_env = a[2] == 'e';
            const char *k, *val;
            char *kv;
            v = flag_value(c, argv, argc, &i, a, n, &rc);
            if (!v) return rc;
            kv = (char *)(uintptr_t)v; /* argv strings are ours to edit */
            if (is_env && *v && !strchr(v, '=')) {
                /* --env KEY: the value of KEY in our own environment, so
                   a secret (an API key) stays out of argv, which every
                   local user reads in /proc/PID/cmdline */
                k = v;
                val = getenv(v);
                if (!val)
                    return usage_error(c, "%.*s %s: expected KEY=VALUE, or the name of a "
                                          "variable set in this environment", (int)n, a, v);
            } else if (split_kv(kv, &k, &val) != 0) {
                return usage_error(c, "%.*s %s: expected KEY=VALUE", (int)n, a, v);
            }
            if ((is_env ? c->env_count : c->label_count) >= MAX_LIST)
                return usage_error(c, "at most %d %s flags", MAX_LIST, is_env ? "--env" : "--label");
            if (is_env) {
                c->env[c->env_count].name = k;
                c->env[c->env_count].value = val;
                c->env_count++;
            } else {
                c->labels[c->label_count].key = k;
                c->labels[c->label_count].value = val;
                c->label_count++;
            }
        } else {
            return usage_error(c, "unknown flag %s", a);
        }
#undef VALUE
    }
    return 0;
}

/* ---- clients ---------------------------------------------------------------- */

static void kube_desc(const cli *c, asb_kube_client_desc *kd) {
    memset(kd, 0, sizeof *kd);
    kd->kubeconfig.path = c->kubeconfig;
    kd->kubeconfig.context = c->context;
    if (c->connect && strcmp(c->connect, "in-cluster") == 0 && !c->kubeconfig) kd->in_cluster = 1;
}

static void set_logger(const cli *c, asb_logger *lg) {
    memset(lg, 0, sizeof *lg);
    if (c->verbosity <= 0) return;
    lg->fn = log_line;
    lg->min_level = c->verbosity >= 2 ? ASB_LOG_DEBUG : ASB_LOG_INFO;
}

/* The sandbox client, made once per run; its Kubernetes client
   (asb_client_kube) serves the reads the sandbox calls do not cover (a
   claim's whole object for -o json), and a NULL -n is the namespace the
   client itself uses (asb_client_namespace: the context's). Nothing is
   sent and kubectl is not started here. */
static int open_client(cli *c) {
    asb_client_desc d;
    asb_error e;
    asb_result r;
    if (c->client) return 0;
    /* bad names are usage errors, found before anything is sent */
    if (c->ns && asb_dns_label_validate(c->ns, strlen(c->ns), &e) != ASB_OK)
        return usage_error(c, "-n %s: %s", c->ns, e.message);
    if (c->sub && strcmp(c->sub, "create") != 0 && strcmp(c->sub, "run") != 0) {
        int i;
        for (i = 0; i < c->npos && strcmp(c->sub, "cp") != 0; i++)
            /* cat, ls-files, stat: the rest are paths */
            if (i == 0 || (strcmp(c->sub, "get") == 0 || strcmp(c->sub, "status") == 0 ||
                           strcmp(c->sub, "rm") == 0))
                if (asb_claim_name_validate(c->pos[i], strlen(c->pos[i]), &e) != ASB_OK)
                    return usage_error(c, "%s", e.message);
    }
    if (c->name && asb_claim_name_validate(c->name, strlen(c->name), &e) != ASB_OK)
        return usage_error(c, "--name: %s", e.message);
    memset(&d, 0, sizeof d);
    kube_desc(c, &d.kube);
    set_logger(c, &d.log);
    d.router_namespace = c->router_ns;
    /* a sandboxd template's sandboxes speak sandboxd, the others the
       legacy runtime: the tool takes whatever the claim's template has */
    d.runtime = ASB_RUNTIME_AUTO;
    if (!c->connect || strcmp(c->connect, "tunnel") == 0) {
        d.mode = ASB_CONNECT_LOCAL_TUNNEL;
    } else if (strcmp(c->connect, "native") == 0) {
        d.mode = ASB_CONNECT_NATIVE_TUNNEL;
    } else if (strncmp(c->connect, "direct=", 7) == 0) {
        d.mode = ASB_CONNECT_DIRECT;
        d.direct_url = c->connect + 7;
    } else if (strncmp(c->connect, "gateway=", 8) == 0) {
        char *slash;
        /* any valid NAME/NS fits (DNS labels, 63 bytes each); longer
           input is refused here rather than cut to a shorter name */
        if (snprintf(c->gw_buf, sizeof c->gw_buf, "%s", c->connect + 8) >= (int)sizeof c->gw_buf)
            return usage_error(c, "--connect gateway=NAME[/NS]: longer than %d bytes",
                               (int)sizeof c->gw_buf - 1);
        slash = strchr(c->gw_buf, '/');
        if (slash) {
            *slash = '\0';
            d.gateway_namespace = slash + 1;
        }
        d.mode = ASB_CONNECT_GATEWAY;
        d.gateway_name = c->gw_buf;
    } else if (strcmp(c->connect, "in-cluster") == 0) {
        d.mode = ASB_CONNECT_IN_CLUSTER;
    } else {
        return usage_error(c, "--connect %s: the modes are tunnel, native, direct=URL, "
                              "gateway=NAME[/NS] and in-cluster", c->connect);
    }
    r = asb_client_create(&d, &c->client, &e);
    if (r == ASB_ERR_KUBECONFIG || r == ASB_ERR_CREDENTIALS)
        return fail(c, r, &e, "cannot load the Kubernetes configuration");
    if (r != ASB_OK) return fail(c, r, &e, "cannot make a sandbox client (--connect %s)",
                                 c->connect ? c->connect : "tunnel");
    c->kube = asb_client_kube(c->client); /* borrowed */
    if (!c->ns) c->ns = asb_client_namespace(c->client);
    return 0;
}

static int no_claim_api(void) {
    fprintf(stderr, "agentsandbox: the cluster serves no SandboxClaims "
                    "(extensions.agents.x-k8s.io)\n  hint: install agent-sandbox with its "
                    "extensions, or check --context\n");
    return EXIT_NOTFOUND;
}

/* The SandboxClaim resource at the version the client uses. */
static int claim_resource(cli *c, asb_kube_resource *res) {
    asb_error e;
    asb_result r = asb_client_claim_resource(c->client, res, &e);
    if (r == ASB_ERR_NOT_FOUND) return no_claim_api();
    if (r != ASB_OK) return fail(c, r, &e, "cannot reach the Kubernetes API");
    return 0;
}

static int attach(cli *c, const char *claim, asb_sandbox **sb) {
    asb_error e;
    asb_result r;
    int rc = open_client(c);
    if (rc) return rc;
    r = asb_client_get_sandbox(c->client, claim, c->ns, 0, sb, &e);
    if (r != ASB_OK)
        return fail(c, r, &e, "cannot attach to claim %s in namespace %s", claim, c->ns);
    return 0;
}

/* ---- output helpers --------------------------------------------------------- */

/* The handle's names are never NULL for a live handle; "" keeps printf safe. */
static const char *nz(const char *s) { return s ? s : ""; }

/* JSON text to stdout as it is, except what a terminal would act on:
   JSON allows DEL and what shown_escaped names raw in a
   string, so they are written as \u escapes (the same value to any JSON
   reader). s is valid JSON (parsed, or from the writer), where those
   bytes occur only inside strings; a C0 byte can only be whitespace there
   (raw ones inside a string fail the parse) and any other is escaped too. */
static void write_json_text(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, run = 0;
    while (i < n) {
        uint32_t cp = 0;
        size_t len = utf8_seq(u + i, n - i, &cp);
        int bad = len == 0 || cp == 0x7f || (cp < 0x20 && cp != '\n' && cp != '\t' && cp != '\r') ||
                  shown_escaped(cp);
        if (!len) len = 1; /* not UTF-8: the parser refuses it; never raw */
        if (!bad) {
            run += len;
            i += len;
            continue;
        }
        fwrite(s + i - run, 1, run, stdout);
        run = 0;
        printf("\\u%04x", (unsigned)(cp ? cp : u[i]));
        i += len;
    }
    fwrite(s + i - run, 1, run, stdout);
}

static int out_is(const cli *c, const char *format) {
    return c->output && strcmp(c->output, format) == 0;
}

/* -o json or -o yaml: an object or list for a program to read. */
static int structured(const cli *c) { return out_is(c, "json") || out_is(c, "yaml"); }

/* ---- YAML output (-o yaml), from a parsed JSON document ---------------------- */

static void indent_to(int n) {
    while (n-- > 0) putchar(' ');
}

/* A string as YAML reads it back: plain when it cannot be mistaken for
   anything else (a name, a path), else double-quoted with JSON's escapes,
   which YAML's double-quoted style shares (DEL and what shown_escaped
   names as \u escapes through write_json_text). */
static void yaml_string(const char *s, size_t n) {
    static const char *const special[] = {"true", "false", "yes", "no", "on", "off",
                                          "null", "y", "n", "~"};
    size_t i;
    int plain = n > 0 && !(s[0] >= '0' && s[0] <= '9') && s[0] != '-' && s[0] != '.';
    for (i = 0; plain && i < n; i++) {
        char ch = s[i];
        plain = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                ch == '-' || ch == '_' || ch == '.' || ch == '/';
    }
    for (i = 0; plain && i < sizeof special / sizeof special[0]; i++) {
        size_t k, l = strlen(special[i]);
        int same = l == n;
        for (k = 0; same && k < n; k++)
            same = (s[k] | 0x20) == special[i][k]; /* ASCII case-insensitive */
        if (same) plain = 0;
    }
    if (plain) {
        fwrite(s, 1, n, stdout);
    } else {
        asb_buf b;
        asb_json_writer w;
        asb_buf_init(&b, NULL);
        asb_json_writer_init(&w, &b);
        w.replace_invalid_utf8 = 1;
        asb_json_string_n(&w, s, n);
        if (asb_json_writer_finish(&w) == ASB_OK) write_json_text(b.ptr, b.len);
        else fputs("\"\"", stdout);
        asb_buf_free(&b);
    }
}

static void yaml_scalar(const asb_json_doc *d, int tok) {
    const asb_json_tok *t = &d->toks[tok];
    if (t->type == ASB_JSON_STRING) {
        asb_buf b;
        asb_buf_init(&b, NULL);
        if (asb_json_append_string(d, tok, &b) == ASB_OK) yaml_string(b.ptr ? b.ptr : "", b.len);
        else fputs("\"\"", stdout);
        asb_buf_free(&b);
    } else if (t->type == ASB_JSON_OBJECT) {
        fputs("{}", stdout);
    } else if (t->type == ASB_JSON_ARRAY) {
        fputs("[]", stdout);
    } else { /* number, true, false, null: the same words in YAML */
        fwrite(d->js + t->start, 1, (size_t)(t->end - t->start), stdout);
    }
}

static int yaml_is_block(const asb_json_doc *d, int tok) {
    const asb_json_tok *t = &d->toks[tok];
    return (t->type == ASB_JSON_OBJECT || t->type == ASB_JSON_ARRAY) && t->size > 0;
}

static void yaml_array(const asb_json_doc *d, int tok, int ind);

/* An object's members at indent ind; the first one goes where the cursor
   is when first_inline (after "- "). */
static void yaml_object(const asb_json_doc *d, int tok, int ind, int first_inline) {
    asb_json_iter it = asb_json_iter_begin(d, tok);
    int key, val, first = 1;
    while (asb_json_iter_next(d, &it, &key, &val)) {
        if (!(first && first_inline)) indent_to(ind);
        first = 0;
        yaml_scalar(d, key);
        putchar(':');
        if (!yaml_is_block(d, val)) {
            putchar(' ');
            yaml_scalar(d, val);
            putchar('\n');
        } else if (d->toks[val].type == ASB_JSON_OBJECT) {
            putchar('\n');
            yaml_object(d, val, ind + 2, 0);
        } else {
            putchar('\n');
            yaml_array(d, val, ind); /* kubectl's style: "- " under the key */
        }
    }
}

static void yaml_array(const asb_json_doc *d, int tok, int ind) {
    asb_json_iter it = asb_json_iter_begin(d, tok);
    int val;
    while (asb_json_iter_next(d, &it, NULL, &val)) {
        indent_to(ind);
        fputs("- ", stdout);
        if (!yaml_is_block(d, val)) {
            yaml_scalar(d, val);
            putchar('\n');
        } else if (d->toks[val].type == ASB_JSON_OBJECT) {
            yaml_object(d, val, ind + 2, 1);
        } else {
            putchar('\n');
            yaml_array(d, val, ind + 2);
        }
    }
}

/* -o json or -o yaml of a JSON text: an apiserver's answer or the
   writer's, printed only once it parses (so nothing raw gets through). */
static int print_structured(const cli *c, const char *js, size_t n) {
    asb_json_doc d;
    asb_error e;
    if (asb_json_doc_parse(&d, js, n, NULL, &e) != ASB_OK)
        return fail(c, e.code, &e, "the answer is not JSON");
    if (out_is(c, "yaml")) {
        if (d.toks[0].type == ASB_JSON_OBJECT && d.toks[0].size > 0) yaml_object(&d, 0, 0, 0);
        else if (d.toks[0].type == ASB_JSON_ARRAY && d.toks[0].size > 0) yaml_array(&d, 0, 0);
        else {
            yaml_scalar(&d, 0);
            putchar('\n');
        }
    } else {
        write_json_text(js, n);
        putchar('\n');
    }
    asb_json_doc_free(&d);
    return 0;
}

/* A writer's document (finished by the caller) to -o json / yaml. */
static int print_writer(const cli *c, asb_json_writer *w, asb_buf *b) {
    int rc = asb_json_writer_finish(w) == ASB_OK ? print_structured(c, b->ptr, b->len) : EXIT_FAIL;
    asb_buf_free(b);
    return rc;
}

static void age(char *out, size_t cap, int64_t created) {
    long long s;
    if (!created) {
        snprintf(out, cap, "<unknown>");
        return;
    }
    s = (long long)(time(NULL) - (time_t)created);
    if (s < 0) s = 0;
    if (s < 120) snprintf(out, cap, "%llds", s);
    else if (s < 7200) snprintf(out, cap, "%lldm", s / 60);
    else if (s < 172800) snprintf(out, cap, "%lldh", s / 3600);
    else snprintf(out, cap, "%lldd", s / 86400);
}

static void str_at(const asb_json_doc *d, int from, const char *path, char *out, size_t cap,
                   const char *dflt) {
    if (asb_json_get_string(d, asb_json_find(d, from, path), out, cap, NULL) != ASB_OK)
        snprintf(out, cap, "%s", dflt);
}

/* One claim's row: ls has them from asb_client_list_claims; get reads the
   claim object, filled into the same struct by claim_from_json. */
typedef struct claim_strs {
    char name[256], ns[64], tpl[256], pool[256], sb[256], reason[128], message[512], ts[64];
} claim_strs;

static void claim_from_json(const asb_json_doc *d, int obj, claim_strs *s, asb_claim_info *ci) {
    asb_json_iter it;
    int cond;
    memset(ci, 0, sizeof *ci);
    str_at(d, obj, "metadata.name", s->name, sizeof s->name, "");
    str_at(d, obj, "metadata.namespace", s->ns, sizeof s->ns, "");
    str_at(d, obj, "spec.sandboxTemplateRef.name", s->tpl, sizeof s->tpl, "");
    str_at(d, obj, "spec.warmPoolRef.name", s->pool, sizeof s->pool, "");
    str_at(d, obj, "status.sandbox.name", s->sb, sizeof s->sb, "");
    if (!s->sb[0]) str_at(d, obj, "status.sandbox.Name", s->sb, sizeof s->sb, "");
    str_at(d, obj, "metadata.creationTimestamp", s->ts, sizeof s->ts, "");
    s->reason[0] = s->message[0] = '\0';
    it = asb_json_iter_begin(d, asb_json_find(d, obj, "status.conditions"));
    while (asb_json_iter_next(d, &it, NULL, &cond)) {
        if (!asb_json_string_eq(d, asb_json_find(d, cond, "type"), "Ready", 5)) continue;
        ci->ready = asb_json_string_eq(d, asb_json_find(d, cond, "status"), "True", 4);
        str_at(d, cond, "reason", s->reason, sizeof s->reason, "");
        str_at(d, cond, "message", s->message, sizeof s->message, "");
    }
    ci->name = s->name;
    ci->namespace_name = s->ns;
    ci->template_name = s->tpl;
    ci->warm_pool = s->pool;
    ci->sandbox_name = s->sb;
    ci->reason = s->reason;
    ci->message = s->message;
    if (s->ts[0]) asb_time_parse_rfc3339(s->ts, strlen(s->ts), &ci->created_unix, NULL);
}

static void table_head(const cli *c, int with_ns) {
    if (with_ns) printf("%-20s ", "NAMESPACE");
    printf("%-32s %-32s %-7s %-24s %-28s %s", "NAME", "SANDBOX", "READY", "REASON", "TEMPLATE",
           out_is(c, "wide") ? "AGE   CREATED              MESSAGE" : "AGE");
    putchar('\n');
}

/* Every string here came from the cluster: through safe(). */
static void claim_row(const cli *c, const asb_claim_info *ci, int with_ns) {
    char when[32], src[300];
    age(when, sizeof when, ci->created_unix);
    if (ci->template_name[0]) snprintf(src, sizeof src, "%s", ci->template_name);
    else if (ci->warm_pool[0]) snprintf(src, sizeof src, "pool:%s", ci->warm_pool);
    else snprintf(src, sizeof src, "<none>");
    if (with_ns) printf("%-20s ", safe(ci->namespace_name));
    printf("%-32s %-32s %-7s %-24s %-28s %s", safe(ci->name),
           ci->sandbox_name[0] ? safe(ci->sandbox_name) : "<none>", ci->ready ? "True" : "False",
           ci->reason[0] ? safe(ci->reason) : "-", safe(src), when);
    if (out_is(c, "wide")) {
        char created[ASB_TIME_SIZE] = "-";
        if (ci->created_unix) asb_time_format_rfc3339(ci->created_unix, created);
        printf("%*s %-20s %s", (int)(5 - (strlen(when) < 5 ? strlen(when) : 5)), "", created,
               ci->message[0] ? safe(ci->message) : "-");
    }
    putchar('\n');
}

/* ---- commands --------------------------------------------------------------- */

static int cmd_version(cli *c) {
    if (structured(c)) {
        asb_buf b;
        asb_json_writer w;
        asb_buf_init(&b, NULL);
        asb_json_writer_init(&w, &b);
        asb_json_object_begin(&w);
        asb_json_key(&w, "cli");
        asb_json_string(&w, ASB_VERSION_STRING);
        asb_json_key(&w, "library");
        asb_json_string(&w, ASB_VERSION_STRING);
        asb_json_key(&w, "tls");
        asb_json_string(&w, asb_tls_backend());
        asb_json_object_end(&w);
        return print_writer(c, &w, &b);
    }
    printf("agentsandbox %s (agentsandbox.h %s, TLS: %s)\n", ASB_VERSION_STRING,
           ASB_VERSION_STRING, asb_tls_backend());
    return 0;
}

static int get_claim(cli *c, const char *name, asb_buf *out) {
    asb_kube_resource res;
    asb_error e;
    asb_result r;
    int rc = claim_resource(c, &res);
    if (rc) return rc;
    r = asb_kube_get(c->kube, &res, c->ns, name, out, &e);
    if (r == ASB_ERR_NOT_FOUND) {
        fprintf(stderr, "agentsandbox: claim %s not found in namespace %s\n  hint: list the "
                        "claims with `agentsandbox ls -n %s` (or -A)\n", safe(name), safe(c->ns), safe(c->ns));
        return EXIT_NOTFOUND;
    }
    if (r != ASB_OK) return fail(c, r, &e, "cannot read claim %s in namespace %s", name, c->ns);
    return 0;
}

static int cmd_get(cli *c) {
    asb_buf list;
    int i, rc = 0, head = 0, n = 0;
    if (c->npos < 1) return usage_error(c, "%s needs at least one CLAIM", c->sub);
    if ((rc = open_client(c)) != 0) return rc;
    asb_buf_init(&list, NULL);
    for (i = 0; i < c->npos; i++) {
        asb_buf b;
        int one;
        asb_buf_init(&b, NULL);
        one = get_claim(c, c->pos[i], &b);
        if (one) {
            rc = one;
        } else if (structured(c) && c->npos == 1) {
            one = print_structured(c, b.ptr, b.len);
            if (one) rc = one;
        } else if (structured(c)) { /* several: one List, as kubectl */
            const char *sep = n ? "," : "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[";
            if (asb_buf_append(&list, sep, strlen(sep)) != ASB_OK ||
                asb_buf_append(&list, b.ptr, b.len) != ASB_OK)
                rc = EXIT_FAIL;
            n++;
        } else if (out_is(c, "name")) {
            printf("sandboxclaim/%s\n", safe(c->pos[i]));
        } else {
            asb_json_doc d;
            asb_error e;
            if (asb_json_doc_parse(&d, b.ptr, b.len, NULL, &e) == ASB_OK) {
                claim_strs cs;
                asb_claim_info ci;
                claim_from_json(&d, 0, &cs, &ci);
                if (!head) table_head(c, 0);
                head = 1;
                claim_row(c, &ci, 0);
                asb_json_doc_free(&d);
            } else {
                rc = fail(c, e.code, &e, "claim %s: the answer is not JSON", c->pos[i]);
            }
        }
        asb_buf_free(&b);
    }
    if (n) {
        if (asb_buf_append(&list, "]}", 2) == ASB_OK) {
            int one = print_structured(c, list.ptr, list.len);
            if (one) rc = one;
        } else {
            rc = EXIT_FAIL;
        }
    }
    asb_buf_free(&list);
    return rc;
}

static int list_opts(const cli *c, asb_claim_list_opts *lo) {
    memset(lo, 0, sizeof *lo);
    lo->namespace_name = c->ns;
    lo->all_namespaces = c->all_namespaces;
    lo->label_selector = c->selector;
    return 0;
}

static int list_failed(const cli *c, asb_result r, const asb_error *e) {
    return fail(c, r, e, "cannot list claims in %s%s%s",
                c->all_namespaces ? "all namespaces" : "namespace ",
                c->all_namespaces ? "" : c->ns, c->selector ? " with that selector" : "");
}

static int cmd_ls(cli *c) {
    asb_claim_list l;
    asb_claim_list_opts lo;
    asb_error e;
    asb_result r;
    size_t i;
    int rc;
    if (c->npos) return usage_error(c, "ls takes no arguments (use -l SELECTOR)");
    if ((rc = open_client(c)) != 0) return rc;
    if (structured(c)) {
        /* the claims as the apiserver sends them, as kubectl prints them */
        asb_kube_resource res;
        asb_kube_list_opts klo;
        asb_buf b;
        if ((rc = claim_resource(c, &res)) != 0) return rc;
        memset(&klo, 0, sizeof klo);
        klo.label_selector = c->selector;
        asb_buf_init(&b, NULL);
        /* ns NULL lists across namespaces (the kube layer's path rule) */
        r = asb_kube_list(c->kube, &res, c->all_namespaces ? NULL : c->ns, &klo, &b, &e);
        rc = r == ASB_OK ? print_structured(c, b.ptr, b.len) : list_failed(c, r, &e);
        asb_buf_free(&b);
        return rc;
    }
    list_opts(c, &lo);
    r = asb_client_list_claims(c->client, &lo, &l, &e);
    if (r == ASB_ERR_NOT_FOUND) return no_claim_api();
    if (r != ASB_OK) return list_failed(c, r, &e);
    if (!l.count && !out_is(c, "name"))
        fprintf(stderr, "No claims found in %s%s.\n", c->all_namespaces ? "any namespace" : "namespace ",
                c->all_namespaces ? "" : safe(c->ns));
    else if (!out_is(c, "name"))
        table_head(c, c->all_namespaces);
    for (i = 0; i < l.count; i++) {
        if (out_is(c, "name")) printf("sandboxclaim/%s\n", safe(l.items[i].name));
        else claim_row(c, &l.items[i], c->all_namespaces);
    }
    asb_claim_list_free(&l);
    return 0;
}

static int delete_one(cli *c, const char *ns, const char *name) {
    asb_error e;
    asb_call_opts co;
    asb_result r;
    if (!ns) ns = asb_client_namespace(c->client);
    memset(&co, 0, sizeof co);
    co.cancel = c->cancel; /* Ctrl-C stops the wait; the apiserver may have taken it */
    co.timeout_ms = c->timeout_ms;
    r = asb_client_delete_sandbox_opts(c->client, name, ns, &co, &e);
    if (r == ASB_ERR_CANCELLED) {
        fprintf(stderr, "agentsandbox: rm cancelled at claim %s in namespace %s (it may be deleted "
                        "or not)\n", safe(name), safe(ns));
        return EXIT_CANCELLED;
    }
    if (r == ASB_ERR_NOT_FOUND) {
        fprintf(stderr, "agentsandbox: claim %s not found in namespace %s\n", safe(name), safe(ns));
        return EXIT_NOTFOUND;
    }
    if (r != ASB_OK) return fail(c, r, &e, "cannot delete claim %s in namespace %s", name, ns);
    if (out_is(c, "name")) printf("sandboxclaim/%s\n", safe(name));
    else printf("sandboxclaim \"%s\" deleted\n", safe(name));
    fflush(stdout);
    return 0;
}

static int cmd_rm(cli *c) {
    int i, rc, worst = 0;
    if (c->npos && (c->selector || c->all))
        return usage_error(c, "rm takes CLAIM names or -l/--all, not both");
    if (!c->npos && !c->selector && !c->all)
        return usage_error(c, "rm needs CLAIM names, -l SELECTOR or --all");
    if (c->output && !out_is(c, "name"))
        return usage_error(c, "rm prints names: -o name, or no -o");
    if ((rc = open_client(c)) != 0) return rc;
    for (i = 0; i < c->npos; i++) {
        int one = delete_one(c, c->ns, c->pos[i]);
        if (one == EXIT_CANCELLED) { /* the rest are not tried: say which */
            for (i++; i < c->npos; i++)
                fprintf(stderr, "agentsandbox: claim %s not deleted (cancelled)\n", safe(c->pos[i]));
            return EXIT_CANCELLED;
        }
        if (one && !worst) worst = one;
    }
    if (c->selector || c->all) {
        asb_claim_list l;
        asb_claim_list_opts lo;
        asb_error e;
        asb_result r;
        size_t k;
        list_opts(c, &lo);
        r = asb_client_list_claims(c->client, &lo, &l, &e);
        if (r == ASB_ERR_NOT_FOUND) return no_claim_api();
        if (r != ASB_OK) return list_failed(c, r, &e);
        for (k = 0; k < l.count; k++) {
            const asb_claim_info *ci = &l.items[k];
            int one;
            if (asb_claim_name_validate(ci->name, strlen(ci->name), NULL) != ASB_OK ||
                asb_dns_label_validate(ci->namespace_name, strlen(ci->namespace_name), NULL) !=
                    ASB_OK) {
                /* the apiserver's answer, not the user's argument */
                fprintf(stderr, "agentsandbox: skipping \"%s\" in namespace \"%s\" from the "
                                "apiserver's list: not a valid claim name\n",
                        safe(ci->name), safe(ci->namespace_name));
                if (!worst) worst = EXIT_FAIL;
                continue;
            }
            one = delete_one(c, ci->namespace_name, ci->name);
            if (one == EXIT_CANCELLED) {
                for (k++; k < l.count; k++)
                    fprintf(stderr, "agentsandbox: claim %s in namespace %s not deleted "
                                    "(cancelled)\n", safe(l.items[k].name),
                            safe(l.items[k].namespace_name));
                worst = EXIT_CANCELLED;
                break;
            }
            /* gone meanwhile is what we wanted */
            if (one && one != EXIT_NOTFOUND && !worst) worst = one;
        }
        asb_claim_list_free(&l);
    }
    return worst;
}

/* POSIX shell quoting of each word: the runtime splits a command string
   as a shell would (shlex), so this keeps every argument whole. */
static int join_command(char **argv, int n, asb_buf *out) {
    int i;
    for (i = 0; i < n; i++) {
        const char *p;
        if (i && asb_buf_append(out, " ", 1) != ASB_OK) return -1;
        if (asb_buf_append(out, "'", 1) != ASB_OK) return -1;
        for (p = argv[i]; *p; p++) {
            if (*p == '\'') {
                if (asb_buf_append(out, "'\\''", 4) != ASB_OK) return -1;
            } else if (asb_buf_append(out, p, 1) != ASB_OK) {
                return -1;
            }
        }
        if (asb_buf_append(out, "'", 1) != ASB_OK) return -1;
    }
    return asb_buf_append(out, "", 1) == ASB_OK ? 0 : -1; /* NUL, not counted below */
}

static int write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w == 0) errno = EIO;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* ---- exec on sandboxd: output as it comes, stdin, a terminal ------------------ */

static volatile sig_atomic_t g_winch;
static int g_wake[2] = {-1, -1}; /* self-pipe: SIGWINCH, and "q" to stop */
static struct termios g_saved_tio;
static int g_raw;

static void on_winch(int sig) {
    int saved = errno;
    (void)sig;
    g_winch = 1;
    if (g_wake[1] >= 0) {
        ssize_t w = write(g_wake[1], "w", 1);
        (void)w;
    }
    errno = saved;
}

/* The local terminal in raw mode while a remote one runs (keys, ^C and ^D
   go to the sandbox as bytes); restored on every way out. */
static void tty_restore(void) {
    if (g_raw) tcsetattr(0, TCSADRAIN, &g_saved_tio);
    g_raw = 0;
}

/* A pipe born close-on-exec (the library may start kubectl from another
   thread at any time): pipe2 where Linux has it (glibc declares it only
   under _GNU_SOURCE, hence the system call; musl builds too), else the
   flag at once after. */
static int pipe_cloexec(int fds[2]) {
#if defined(__linux__) && defined(SYS_pipe2)
    if (syscall(SYS_pipe2, fds, O_CLOEXEC) == 0) return 0;
    if (errno != ENOSYS) return -1;
#endif
    if (pipe(fds) != 0) return -1;
    (void)fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    (void)fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    return 0;
}

static void tty_raw(void) {
    struct termios t;
    if (!isatty(0) || tcgetattr(0, &g_saved_tio) != 0) return;
    t = g_saved_tio;
    t.c_iflag &= ~(tcflag_t)(IGNBRK | BRKINT | PARMRK | ISTRIP | INLCR | IGNCR | ICRNL | IXON);
    t.c_oflag &= ~(tcflag_t)OPOST;
    t.c_lflag &= ~(tcflag_t)(ECHO | ECHONL | ICANON | ISIG | IEXTEN);
    t.c_cflag &= ~(tcflag_t)(CSIZE | PARENB);
    t.c_cflag |= CS8;
    t.c_cc[VMIN] = 1;
    t.c_cc[VTIME] = 0;
    if (tcsetattr(0, TCSADRAIN, &t) == 0) { /* keeps type-ahead */
        g_raw = 1;
        atexit(tty_restore);
    }
}

/* The first error writing the command's output here (0: none); EPIPE,
   a reader that went away (`| head`), is not one: the rest is dropped
   quietly, as kubectl exec does. Set from within asb_process_wait (it
   calls on_output on its caller's thread), read once it returned. */
static int g_out_errno;

static void exec_output(void *ud, asb_process_output which, const char *data, size_t len) {
    (void)ud;
    /* the command's own bytes, as kubectl exec relays them */
    if (write_all(which == ASB_PROCESS_STDERR ? 2 : 1, data, len) != 0 && !g_out_errno &&
        errno != EPIPE)
        g_out_errno = errno ? errno : EIO;
}

/* Output lost (a full disk, an I/O error) is a failure of exec, whatever
   the command's own exit code: said once, exit 1. */
static int output_lost(const char *claim, int en) {
    fprintf(stderr, "agentsandbox: exec in claim %s: its output could not be written here "
            "(%s); the command ran\n", safe(claim), strerror(en));
    return EXIT_FAIL;
}

typedef struct relay {
    asb_process *p;
    int forward_stdin;
    int tty;
} relay;

/* stdin to the process (-i), and the terminal's size after SIGWINCH (-t),
   on a thread of its own while the main thread waits for output. */
static void *relay_main(void *arg) {
    relay *r = (relay *)arg;
    int stdin_open = r->forward_stdin;
    for (;;) {
        struct pollfd pf[2];
        nfds_t n = 1;
        asb_error e;
        pf[0].fd = g_wake[0];
        pf[0].events = POLLIN;
        if (stdin_open) {
            pf[1].fd = 0;
            pf[1].events = POLLIN;
            n = 2;
        }
        if (poll(pf, n, -1) < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (pf[0].revents) {
            char w[64];
            ssize_t k = read(g_wake[0], w, sizeof w);
            if (k > 0 && memchr(w, 'q', (size_t)k)) break;
            if (g_winch && r->tty) {
                struct winsize ws;
                g_winch = 0;
                if (ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col)
                    asb_process_resize(r->p, ws.ws_row, ws.ws_col, &e);
            }
        }
        if (n == 2 && (pf[1].revents & (POLLIN | POLLHUP | POLLERR))) {
            char buf[16384];
            ssize_t k = read(0, buf, sizeof buf);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0) { /* EOF: the process's stdin closes too */
                asb_process_close_stdin(r->p, &e);
                stdin_open = 0;
            } else if (asb_process_write_stdin(r->p, buf, (size_t)k, &e) != ASB_OK) {
                stdin_open = 0; /* it ended or closed its stdin */
            }
        }
    }
    return NULL;
}

/* The command as a sandboxd process: stdout and stderr as they come,
   stdin with -i, a terminal with -t (sized as this one, resized on
   SIGWINCH). Ctrl-C without -t cancels (sandboxd then ends the process:
   exit 130); with -t it is a key for the remote terminal. */
static int exec_stream(cli *c, asb_sandbox *sb) {
    asb_process_opts po;
    asb_process *p = NULL;
    asb_error e;
    asb_result r;
    relay rl;
    pthread_t th;
    struct sigaction sa, old_hup, old_quit;
    int code = 0, rc, threaded = 0, raw_signals = 0;
    memset(&po, 0, sizeof po);
    po.argv = (const char *const *)c->cmd;
    po.argc = (size_t)c->ncmd;
    po.pty = c->tty;
    if (c->tty) {
        struct winsize ws;
        if (ioctl(0, TIOCGWINSZ, &ws) == 0 && ws.ws_row && ws.ws_col) {
            po.pty_rows = ws.ws_row;
            po.pty_cols = ws.ws_col;
        }
    }
    po.on_output = exec_output;
    po.timeout_ms = c->timeout_ms; /* default none: a shell may run for hours */
    po.cancel = c->cancel;
    fflush(stdout);
    r = asb_sandbox_process_start(sb, &po, &p, &e);
    if (r != ASB_OK)
        return fail(c, r, &e, "exec in claim %s (namespace %s)", nz(asb_sandbox_claim_name(sb)),
                    nz(asb_sandbox_namespace(sb)));
    if (!c->stdin_fwd) asb_process_close_stdin(p, &e); /* no -i: EOF at once */
    if (c->stdin_fwd || c->tty) {
        /* close-on-exec: the library's threads may start kubectl */
        if (pipe_cloexec(g_wake) == 0) {
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_winch;
            sigemptyset(&sa.sa_mask);
            if (c->tty) sigaction(SIGWINCH, &sa, NULL);
            rl.p = p;
            rl.forward_stdin = c->stdin_fwd;
            rl.tty = c->tty;
            threaded = pthread_create(&th, NULL, relay_main, &rl) == 0;
        }
        if (c->tty && isatty(0)) {
            /* raw mode sends no SIGINT or SIGQUIT from the keyboard, but a
               SIGHUP (the terminal closed) or a SIGQUIT from outside
               would end the tool with the terminal left raw: they cancel
               as SIGINT and SIGTERM do, and the way out restores it (one
               ignored, as under nohup, stays ignored) */
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = on_signal;
            sigemptyset(&sa.sa_mask);
            sigaction(SIGHUP, NULL, &old_hup);
            sigaction(SIGQUIT, NULL, &old_quit);
            if (old_hup.sa_handler != SIG_IGN) sigaction(SIGHUP, &sa, NULL);
            if (old_quit.sa_handler != SIG_IGN) sigaction(SIGQUIT, &sa, NULL);
            raw_signals = 1;
            tty_raw();
        }
    }
    r = asb_process_wait(p, 0, &code, &e);
    if (threaded) {
        ssize_t w = write(g_wake[1], "q", 1);
        (void)w;
        pthread_join(th, NULL);
    }
    tty_restore();
    if (raw_signals) {
        sigaction(SIGHUP, &old_hup, NULL);
        sigaction(SIGQUIT, &old_quit, NULL);
    }
    if (r == ASB_ERR_CANCELLED) {
        fprintf(stderr, "agentsandbox: exec in claim %s cancelled (the process was ended)\n",
                safe(asb_sandbox_claim_name(sb)));
        rc = EXIT_CANCELLED;
    } else if (r != ASB_OK) {
        rc = fail(c, r, &e, "exec in claim %s (namespace %s)", nz(asb_sandbox_claim_name(sb)),
                  nz(asb_sandbox_namespace(sb)));
    } else if (g_out_errno) {
        rc = output_lost(asb_sandbox_claim_name(sb), g_out_errno);
    } else {
        /* sandboxd tells a signal death without its number: 255 */
        rc = code < 0 ? 255 : remote_exit_code(code);
    }
    asb_process_free(p);
    return rc;
}

static int is_sandboxd(asb_sandbox *sb) { return strcmp(asb_sandbox_runtime(sb), "sandboxd") == 0; }

/* Runs the command on a handle and relays its output; the exit code is
   the command's once it ran. On sandboxd the output streams; on the
   legacy runtime asb_sandbox_run buffers the whole output (its /execute
   answers once the command ended), so it arrives at the end. */
static int run_on(cli *c, asb_sandbox *sb) {
    asb_buf cmd;
    asb_call_opts co;
    asb_run_result res;
    asb_error e;
    asb_result r;
    int rc;
    if (is_sandboxd(sb)) return exec_stream(c, sb);
    asb_buf_init(&cmd, NULL);
    if (join_command(c->cmd, c->ncmd, &cmd) != 0) {
        asb_buf_free(&cmd);
        return usage_error(c, "out of memory");
    }
    memset(&co, 0, sizeof co);
    co.timeout_ms = c->timeout_ms;
    co.cancel = c->cancel;
    memset(&res, 0, sizeof res);
    r = asb_sandbox_run_opts(sb, cmd.ptr, &co, &res, &e);
    asb_buf_free(&cmd);
    if (r != ASB_OK) {
        rc = r == ASB_ERR_CANCELLED
                 ? (fprintf(stderr, "agentsandbox: exec in claim %s cancelled (the command may "
                                    "still run until the runtime ends it)\n",
                            safe(asb_sandbox_claim_name(sb))),
                    EXIT_CANCELLED)
                 : fail(c, r, &e, "exec in claim %s (namespace %s)", nz(asb_sandbox_claim_name(sb)),
                        nz(asb_sandbox_namespace(sb)));
    } else {
        fflush(stdout);
        if (write_all(1, res.out.ptr, res.out.len) != 0 ||
            write_all(2, res.err.ptr, res.err.len) != 0)
            rc = errno == EPIPE ? EXIT_FAIL
                                : output_lost(asb_sandbox_claim_name(sb), errno ? errno : EIO);
        else rc = remote_exit_code(res.exit_code);
    }
    asb_run_result_free(&res);
    return rc;
}

static int cmd_exec(cli *c) {
    asb_sandbox *sb;
    int rc;
    if (c->npos != 1) return usage_error(c, "exec needs one CLAIM, then -- and the command");
    if (c->ncmd < 1) return usage_error(c, "exec needs a command after --");
    if ((rc = attach(c, c->pos[0], &sb)) != 0) return rc;
    if ((c->stdin_fwd || c->tty) && !is_sandboxd(sb)) {
        /* the legacy runtime's /execute takes a whole command and answers
           once it ended: no stdin, no terminal */
        fprintf(stderr, "agentsandbox: exec %s: claim %s runs the legacy runtime, whose HTTP API "
                        "(/execute) takes no stdin and gives no terminal; nothing was run\n"
                        "  hint: use a sandboxd template (agent-sandbox v0.5+), or drop %s and "
                        "give input inside the command: -- sh -c 'printf ... | CMD'\n",
                c->tty ? (c->stdin_fwd ? "-it" : "-t") : "-i", safe(c->pos[0]),
                c->tty ? (c->stdin_fwd ? "-i and -t" : "-t") : "-i");
        return EXIT_USAGE;
    }
    return run_on(c, sb);
}

/* ---- files: streamed, with a progress bar on a terminal ------------------------ */

typedef struct xfer {
    int fd;
    uint64_t done, total; /* total 0: unknown */
    int show;             /* stderr is a terminal */
    int64_t start_ms, last_ms;
    char label[256]; /* a path, maybe from the sandbox's listing: safe() */
} xfer;

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void human(char *out, size_t cap, double v) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    snprintf(out, cap, u ? "%.1f %s" : "%.0f %s", v, units[u]);
}

/* s in exactly w columns, a code point taken as one: cut between code
   points, never inside one (a cut sequence is not UTF-8 and a terminal
   shows junk), keeping the end, where a path has its file's name, behind
   "..."; padded with spaces. s is safe() already: no control bytes. */
static void fit_label(char *out, size_t cap, const char *s, int w) {
    size_t len = strlen(s), i, start = 0, o = 0;
    int n = 0, skip;
    for (i = 0; i < len; i++) n += ((unsigned char)s[i] & 0xC0) != 0x80;
    if (n > w) { /* "..." then the last w - 3 code points */
        skip = n - (w - 3);
        for (start = 0; start < len && skip > 0; start++)
            if (((unsigned char)s[start + 1] & 0xC0) != 0x80) skip--;
        if (cap > 3) memcpy(out, "...", 3), o = 3;
        n = w; /* "..." and w - 3 code points: no padding */
    }
    for (i = start; i < len && o + 1 < cap; i++) out[o++] = s[i];
    for (; n < w && o + 1 < cap; n++) out[o++] = ' ';
    out[o] = '\0';
}

/* "label  12.0 MiB / 100.0 MiB  35.2 MiB/s  ETA 3m05s", redrawn at most
   10 times a second on one line of the terminal (a line wider than it
   wraps, and the redraw then clears only its last row); nothing at all
   when stderr is not a terminal. */
static void progress(xfer *x, int final) {
    char done[32], total[32], rate[32], eta[32] = "", rest[192], label[4 * 40 + 8];
    struct winsize ws;
    int64_t t;
    double secs, r;
    int cols = 80, lw;
    if (!x->show) return;
    t = now_ms();
    if (!final && t - x->last_ms < 100) return;
    x->last_ms = t;
    secs = (double)(t - x->start_ms) / 1000.0;
    r = secs > 0 ? (double)x->done / secs : 0;
    human(done, sizeof done, (double)x->done);
    human(total, sizeof total, (double)x->total);
    human(rate, sizeof rate, r);
    if (x->total && r > 0 && !final) {
        double left = (double)(x->total - x->done) / r;
        if (left >= 100 * 3600.0)
            snprintf(eta, sizeof eta, "  ETA >99h");
        else if (left >= 3600)
            snprintf(eta, sizeof eta, "  ETA %dh%02dm", (int)(left / 3600), (int)left % 3600 / 60);
        else if (left >= 60)
            snprintf(eta, sizeof eta, "  ETA %dm%02ds", (int)(left / 60), (int)left % 60);
        else
            snprintf(eta, sizeof eta, "  ETA %.0fs", left);
    }
    snprintf(rest, sizeof rest, " %s%s%s  %s/s%s", done, x->total ? " / " : "",
             x->total ? total : "", rate, eta);
    if (ioctl(2, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) cols = ws.ws_col;
    /* the label takes what the numbers leave of the row, 40 at most */
    lw = cols - 1 - (int)strlen(rest);
    if (lw > 40) lw = 40;
    if (lw < 8) lw = 8;
    fit_label(label, sizeof label, x->label, lw);
    fprintf(stderr, "\r\033[K%s%s", label, rest);
    if (final) fputc('\n', stderr);
    fflush(stderr);
}

static long xfer_read(void *ud, char *buf, size_t cap) {
    xfer *x = (xfer *)ud;
    ssize_t n;
    do {
        n = read(x->fd, buf, cap);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return -1;
    x->done += (uint64_t)n;
    progress(x, 0);
    return (long)n;
}

static asb_result xfer_write(void *ud, const char *data, size_t len) {
    xfer *x = (xfer *)ud;
    if (write_all(x->fd, data, len) != 0) return ASB_ERR_IO;
    x->done += len;
    progress(x, 0);
    return ASB_OK;
}

static void xfer_init(xfer *x, int fd, uint64_t total, const char *label) {
    memset(x, 0, sizeof *x);
    x->fd = fd;
    x->total = total;
    safe_text_to(x->label, sizeof x->label, label, strlen(label));
    x->show = isatty(2);
    x->start_ms = x->last_ms = now_ms();
}

static void call_opts(const cli *c, asb_call_opts *co) {
    memset(co, 0, sizeof *co);
    co->timeout_ms = c->timeout_ms;
    co->cancel = c->cancel;
}

/* How deep cp -r goes below its source, both ways. Down, the listings
   are the sandbox's to make (the runtime in it is the sandboxed code's to
   replace): a tree that never ends recursed until the stack ran out (a
   crash at some 850 levels, each frame holding two paths). Up, a local
   tree as deep (made by another user of a shared directory, or by
   accident) did the same, each level also holding its directory's
   descriptor open: the cap bounds both. Legitimate trees are far
   shallower. */
#define CP_MAX_DEPTH 256
/* How many entries (files and directories, counted as their listings
   arrive) one cp -r down may list in all. The depth cap alone does not
   end a copy: a sandbox listing many directories at every level (that
   are empty 255 levels down) asks for more directories than there are
   atoms. A million is far above a checkout or a dataset of files. */
#define CP_MAX_ENTRIES 1000000
/* The names of directories listed and not yet copied, in bytes, across
   every level of one cp -r down. A level frees its listing (up to the
   library's 16 MiB a body) before it descends and keeps only these
   names, each at most NAME_MAX bytes (a longer one cannot be made here:
   skipped): a sandbox listing wide directories at every level cannot
   make the copy hold more than this. */
#define CP_MAX_PENDING_NAMES (64u << 20)

/* One cp -r, either way. An entry it leaves out for its own reason (a
   planted link where the copy goes, an entry that changed while being
   copied, a name with control characters) is named on stderr and the
   copy goes on with the rest, as GNU cp does; the exit code is then 1.
   So is an entry that could not be read, on either side: gone since its
   directory was listed, or refused (cp_entry_failed); its exit code is
   that failure's (3 when not found). Everything else that fails stops
   the copy: it would fail every entry after it too. */
typedef struct cp_walk {
    uint64_t entries; /* down: what the listings held so far (CP_MAX_ENTRIES) */
    size_t pending;   /* down: bytes of directory names waiting (CP_MAX_PENDING_NAMES) */
    int skipped;      /* an entry was left out (and named): exit 1 at the end */
    int failed;       /* the highest exit code of an entry not copied, or 0 */
} cp_walk;

/* A sandbox's failure that concerns one path, not the copy: the runtime
   cannot find it (removed since the listing, or a name its listing
   mangled: the legacy runtime shows bytes that are not UTF-8 as U+FFFD,
   a name that then 404s) or will not let us read it (403). A claim or a
   connection gone, a deadline, a 5xx from the router, a cancel: every
   entry after would fail the same way, so those stop the copy. */
static int cp_entry_failed(asb_result r, const asb_error *e) {
    /* a Kubernetes Status reason ("NotFound", "Forbidden"): the apiserver
       answered the tunnel's dial, the pod or the router is gone or barred,
       and every entry after would meet it too. sandboxd's own codes are
       NOT_FOUND / PERMISSION_DENIED; the legacy runtime sets none */
    if (e->reason[0] && strcmp(e->reason, "NOT_FOUND") != 0 &&
        strcmp(e->reason, "PERMISSION_DENIED") != 0)
        return 0;
    if (r == ASB_ERR_NOT_FOUND || r == ASB_ERR_PERMISSION_DENIED) return 1;
    return r == ASB_ERR_HTTP_STATUS && (e->http_status == 404 || e->http_status == 403);
}

static void cp_note_failed(cp_walk *w, int code) {
    if (code > w->failed) w->failed = code;
}

/* The exit code of a whole cp -r: what stopped it, else the worst entry
   left out. */
static int cp_walk_exit(int rc, const cp_walk *w) {
    if (rc) return rc;
    if (w->failed) return w->failed;
    return w->skipped ? EXIT_FAIL : 0;
}

/* Uploads the open file fd (closed here), named local in messages. */
static int upload_fd(cli *c, asb_sandbox *sb, int fd, const char *local, const char *remote) {
    struct stat st;
    asb_call_opts co;
    asb_error e;
    asb_result r;
    xfer x;
    int seen = fstat(fd, &st) == 0;
    if (!seen || !S_ISREG(st.st_mode)) {
        int dir = seen && S_ISDIR(st.st_mode);
        close(fd);
        /* a directory is only opened here when it was not one a moment
           ago (cp looks first, and sends a directory to the -r walk) */
        if (dir)
            fprintf(stderr, "agentsandbox: cp: %s changed while being copied (not a directory "
                    "when looked at, a directory when opened): not copied\n", safe(local));
        else
            fprintf(stderr, "agentsandbox: cp: %s is not a regular file\n", safe(local));
        return dir ? EXIT_FAIL : EXIT_USAGE;
    }
    call_opts(c, &co);
    xfer_init(&x, fd, (uint64_t)st.st_size, local);
    c->file_op = 1;
    r = asb_sandbox_write_stream_opts(sb, remote, xfer_read, &x, (uint64_t)st.st_size, &co, &e);
    progress(&x, 1);
    close(fd);
    if (r != ASB_OK)
        return fail(c, r, &e, "cp %s to %s:%s", local, nz(asb_sandbox_claim_name(sb)), remote);
    return 0;
}

static int upload_file(cli *c, asb_sandbox *sb, const char *local, const char *remote) {
    int fd = open(local, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int en = errno;
        fprintf(stderr, "agentsandbox: cp: cannot open %s: %s\n", safe(local), strerror(en));
        return en == ENOENT ? EXIT_NOTFOUND : EXIT_FAIL;
    }
    return upload_fd(c, sb, fd, local, remote);
}

/* Creates a temporary file in the directory dfd, named prefix plus
   ".agentsandbox-" and random hex (mkstemp has no *at form):
   O_EXCL|O_NOFOLLOW, so a name someone planted (a file, a symlink) is
   never opened, only skipped for another. -1 and errno on failure. */
/* A temporary name's random part: /dev/urandom, else (an empty root) the
   clock, the pid and a counter; O_EXCL, not the number, is the safety.
   (libc only: the CLI uses nothing of the header but its public API.) */
static unsigned temp_nonce(void) {
    static unsigned seq;
    unsigned v = 0;
    struct timespec ts;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, &v, sizeof v);
        close(fd);
        if (n == (ssize_t)sizeof v) return v;
    }
    clock_gettime(CLOCK_REALTIME, &ts);
    return (unsigned)ts.tv_nsec ^ ((unsigned)getpid() * 2654435761u) ^ (++seq * 40503u);
}

static int open_temp_at(int dfd, const char *prefix, char *tmp, size_t cap) {
    int i, fd = -1;
    errno = EEXIST;
    for (i = 0; i < 100 && errno == EEXIST; i++) {
        unsigned v = temp_nonce();
        if (snprintf(tmp, cap, "%s.agentsandbox-%08x", prefix, v) >= (int)cap) {
            errno = ENAMETOOLONG;
            return -1;
        }
        fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) return fd;
    }
    return -1;
}

/* Into a temporary file beside the target, renamed at the end: a failed
   copy never leaves a half file. The target is `name` relative to the
   directory dfd (AT_FDCWD for a plain cp), `shown` in messages. In a
   cp -r tree (`tree` not NULL) an existing symlink there is refused and
   the file skipped: someone who can write to the destination planted
   it, and though the rename would only replace the link, the user meant
   a copy of the tree. The file's mode is what a new file gets (0666 less
   the umask), or the permission bits of the regular file it replaces when
   that one is ours (as GNU cp keeps a target's mode): never its setuid,
   setgid or sticky bit (a file renamed into place is ours, with the
   sandbox's bytes), and never the bits of another user's file (one
   planted world-readable where the copy goes would show them our data),
   nor of a file with another name too (where protected_hardlinks is off,
   another user can link one of ours, world-readable, there). */
static int download_file(cli *c, asb_sandbox *sb, const char *remote, int dfd, const char *name,
                         const char *shown, uint64_t size, cp_walk *tree) {
    char tmp[4096];
    asb_call_opts co;
    asb_error e;
    asb_result r;
    xfer x;
    struct stat old;
    mode_t mode = 0666 & ~g_umask;
    int fd;
    call_opts(c, &co);
    c->file_op = 1;
    if (!tree && strcmp(name, "-") == 0) {
        fflush(stdout);
        xfer_init(&x, 1, size, remote);
        r = asb_sandbox_read_stream_opts(sb, remote, xfer_write, &x, &co, &e);
        progress(&x, 1);
        return r == ASB_OK ? 0 : fail(c, r, &e, "cp %s:%s", nz(asb_sandbox_claim_name(sb)), remote);
    }
    if (tree) {
        struct stat st;
        if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
            fprintf(stderr, "agentsandbox: cp: %s is a symlink: not copying over it, skipped "
                    "(remove it, or copy to a directory only you can write to)\n", safe(shown));
            tree->skipped = 1;
            return 0;
        }
    }
    /* in a tree the name is the sandbox's: up to NAME_MAX bytes, with no
       room for a suffix, so the temporary file gets a name of its own */
    fd = open_temp_at(dfd, tree ? "" : name, tmp, sizeof tmp);
    if (fd < 0) {
        fprintf(stderr, "agentsandbox: cp: cannot write beside %s: %s\n", safe(shown), strerror(errno));
        return EXIT_FAIL;
    }
    xfer_init(&x, fd, size, remote);
    r = asb_sandbox_read_stream_opts(sb, remote, xfer_write, &x, &co, &e);
    progress(&x, 1);
    if (fstatat(dfd, name, &old, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(old.st_mode) &&
        old.st_uid == geteuid() && old.st_nlink == 1)
        mode = old.st_mode & 0777;
    if (r == ASB_OK && (fchmod(fd, mode) != 0 || close(fd) != 0)) {
        r = ASB_ERR_IO;
        snprintf(e.message, sizeof e.message, "%.400s: %s", tmp, strerror(errno));
        e.http_status = 0;
    } else if (r != ASB_OK) {
        close(fd);
    }
    if (r == ASB_OK && renameat(dfd, tmp, dfd, name) != 0) {
        r = ASB_ERR_IO;
        snprintf(e.message, sizeof e.message, "rename to %.400s: %s", shown, strerror(errno));
        e.http_status = 0;
    }
    if (r != ASB_OK) {
        unlinkat(dfd, tmp, 0);
        if (tree && cp_entry_failed(r, &e)) { /* named; the rest of the tree still comes */
            cp_note_failed(tree, fail(c, r, &e, "cp %s:%s to %s, not copied",
                                      nz(asb_sandbox_claim_name(sb)), remote, shown));
            return 0;
        }
        return fail(c, r, &e, "cp %s:%s to %s", nz(asb_sandbox_claim_name(sb)), remote, shown);
    }
    return 0;
}

static int join_path(char *out, size_t cap, const char *a, const char *b) {
    size_t n = strlen(a);
    int w = n && a[n - 1] == '/' ? snprintf(out, cap, "%s%s", a, b)
                                 : snprintf(out, cap, "%s/%s", a, b);
    return w < 0 || (size_t)w >= cap ? -1 : 0;
}

/* What an entry is, for the message when it changed under the copy. */
static const char *kind_of(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISREG(m)) return "a file";
    return S_ISLNK(m) ? "a symlink" : "neither file nor directory";
}

/* cp -r up: every regular file below `local` to the same place below
   `remote`; `local` is the directory dfd (closed here), `depth` levels
   below the source. API friction: there is no mkdir, so an empty
   directory is not copied (the runtime makes parents on upload). Entries
   are opened relative to their directory's descriptor and never through
   a symlink: opened by path, another local user who can write to the tree
   could swap an entry, or a directory above it, for a symlink to a file
   of ours between the listing and the open, and that file went up. An
   entry that turns from a file into a directory (or back) between the
   two is not copied, and said so. Hard links cannot be told apart:
   see the cp help. */
static int upload_dir(cli *c, asb_sandbox *sb, int dfd, const char *local, const char *remote,
                      int depth, cp_walk *w) {
    DIR *d = fdopendir(dfd);
    struct dirent *de;
    int rc = 0;
    if (!d) {
        fprintf(stderr, "agentsandbox: cp: cannot read directory %s: %s\n", safe(local), strerror(errno));
        close(dfd);
        return EXIT_FAIL;
    }
    while (!rc && (de = readdir(d)) != NULL) {
        char lp[4096], rp[4096];
        struct stat st, now;
        const char *p;
        int fd = -1, isdir, en, ctl = 0;
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        for (p = de->d_name; *p; p++) ctl |= (unsigned char)*p < 0x20 || *p == 0x7f;
        if (ctl) {
            /* the library sends no path with control bytes (nor could the
               sandbox's listing show it safely): as down, the entry is
               named and skipped, the rest goes up, exit 1 */
            fprintf(stderr, "agentsandbox: cp: skipping the entry \"%s\" of %s (control "
                    "characters in its name)\n", safe(de->d_name), safe(local));
            w->skipped = 1;
            continue;
        }
        if (join_path(lp, sizeof lp, local, de->d_name) || join_path(rp, sizeof rp, remote, de->d_name)) {
            rc = usage_error(c, "cp: a path below %s is too long", local);
            break;
        }
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            en = errno;
            if (en != ENOENT && en != EACCES) {
                fprintf(stderr, "agentsandbox: cp: cannot stat %s: %s\n", safe(lp), strerror(en));
                rc = EXIT_FAIL;
                break;
            }
            /* gone since the listing, or not ours to look at: as down, it
               is named, the rest goes up, and the exit code says so */
            fprintf(stderr, "agentsandbox: cp: cannot stat %s: %s: not copied\n", safe(lp),
                    strerror(en));
            cp_note_failed(w, en == ENOENT ? EXIT_NOTFOUND : EXIT_FAIL);
            continue;
        }
        isdir = S_ISDIR(st.st_mode);
        if (!isdir && !S_ISREG(st.st_mode)) { /* a symlink, a device, a fifo */
            fprintf(stderr, "agentsandbox: cp: skipping %s (not a file or directory)\n", safe(lp));
            continue;
        }
        if (isdir && depth >= CP_MAX_DEPTH) { /* before its descriptor is taken */
            fprintf(stderr, "agentsandbox: cp: %s is more than %d directories below the source: "
                    "not copied (a tree without end?)\n", safe(lp), CP_MAX_DEPTH);
            rc = EXIT_FAIL;
            break;
        }
        fd = openat(dirfd(d), de->d_name,
                    O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (isdir ? O_DIRECTORY : 0));
        en = fd < 0 ? errno : 0;
        if (en == ENOTDIR &&
            fstatat(dirfd(d), de->d_name, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
            !S_ISLNK(now.st_mode)) {
            /* a directory when listed, now a file (or a fifo...) */
            fprintf(stderr, "agentsandbox: cp: %s changed while being copied (%s when listed, "
                    "%s when opened): not copied\n", safe(lp), kind_of(st.st_mode),
                    kind_of(now.st_mode));
            w->skipped = 1;
        } else if (en == ELOOP || en == ENOTDIR || en == ENXIO) {
            /* it changed since the listing (swapped for a link) */
            fprintf(stderr, "agentsandbox: cp: skipping %s (not a file or directory)\n", safe(lp));
        } else if (en == ENOENT || en == EACCES || en == EPERM) {
            /* one file gone since the listing, or not ours to read: as a
               404 or 403 down, named, not copied, the rest goes up */
            fprintf(stderr, "agentsandbox: cp: cannot open %s: %s: not copied\n", safe(lp),
                    strerror(en));
            cp_note_failed(w, en == ENOENT ? EXIT_NOTFOUND : EXIT_FAIL);
        } else if (fd < 0) { /* out of descriptors...: the rest would fail too */
            fprintf(stderr, "agentsandbox: cp: cannot open %s: %s\n", safe(lp), strerror(en));
            rc = EXIT_FAIL;
        } else if (fstat(fd, &now) != 0) {
            fprintf(stderr, "agentsandbox: cp: cannot stat %s: %s\n", safe(lp), strerror(errno));
            close(fd);
            rc = EXIT_FAIL;
        } else if ((now.st_mode & S_IFMT) != (st.st_mode & S_IFMT)) {
            /* a file when listed, now a directory (or a fifo...) */
            fprintf(stderr, "agentsandbox: cp: %s changed while being copied (%s when listed, "
                    "%s when opened): not copied\n", safe(lp), kind_of(st.st_mode),
                    kind_of(now.st_mode));
            close(fd);
            w->skipped = 1;
        } else {
            rc = isdir ? upload_dir(c, sb, fd, lp, rp, depth + 1, w) : upload_fd(c, sb, fd, lp, rp);
        }
        if (g_signal) rc = EXIT_CANCELLED;
    }
    closedir(d);
    return rc;
}

static int upload_tree(cli *c, asb_sandbox *sb, const char *local, const char *remote) {
    cp_walk w;
    int rc, dfd = open(local, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        int en = errno;
        fprintf(stderr, "agentsandbox: cp: cannot read directory %s: %s\n", safe(local), strerror(en));
        return en == ENOENT ? EXIT_NOTFOUND : EXIT_FAIL;
    }
    memset(&w, 0, sizeof w);
    rc = upload_dir(c, sb, dfd, local, remote, 0, &w);
    return cp_walk_exit(rc, &w);
}

/* cp -r down: `remote` becomes the directory `name` below the directory
   pfd, `local` in messages. Each level is made and opened relative to
   its parent's descriptor, below the destination never through a
   symlink (O_NOFOLLOW): in a directory others can write to (/tmp), one
   of them could plant a link where the copy makes a directory, and the
   files the sandbox names were written wherever it pointed: such a link
   is refused and its directory skipped (w->skipped), the rest copied.
   The destination itself (depth 0, the user's word) is followed, as cp
   does. */
static int download_tree(cli *c, asb_sandbox *sb, const char *remote, int pfd, const char *name,
                         const char *local, int depth, cp_walk *w) {
    asb_file_list fl;
    asb_call_opts co;
    asb_error e;
    asb_result r;
    size_t i, at, dlen = 0, dcap = 0;
    char *dirs = NULL; /* the directories' names, each NUL-terminated */
    int rc = 0, dfd;
    if (depth > CP_MAX_DEPTH) {
        fprintf(stderr, "agentsandbox: cp: %s is more than %d directories below the source: "
                "not copied (a tree without end?)\n", safe(remote), CP_MAX_DEPTH);
        return EXIT_FAIL;
    }
    call_opts(c, &co);
    c->file_op = 1;
    r = asb_sandbox_list_opts(sb, remote, &fl, &co, &e);
    if (r != ASB_OK && depth && cp_entry_failed(r, &e)) { /* as a file gone or refused */
        cp_note_failed(w, fail(c, r, &e, "cp: list %s:%s, not copied",
                               nz(asb_sandbox_claim_name(sb)), remote));
        return 0;
    }
    if (r != ASB_OK)
        return fail(c, r, &e, "cp: list %s:%s", nz(asb_sandbox_claim_name(sb)), remote);
    w->entries += fl.count;
    if (w->entries > CP_MAX_ENTRIES) {
        fprintf(stderr, "agentsandbox: cp: stopped at %s: the copy listed more than %d files and "
                "directories (a tree without end?)\n", safe(remote), CP_MAX_ENTRIES);
        asb_file_list_free(&fl);
        return EXIT_FAIL;
    }
    if (mkdirat(pfd, name, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "agentsandbox: cp: cannot make directory %s: %s\n", safe(local), strerror(errno));
        asb_file_list_free(&fl);
        return EXIT_FAIL;
    }
    dfd = openat(pfd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (depth ? O_NOFOLLOW : 0));
    if (dfd < 0) {
        struct stat st;
        int en = errno;
        asb_file_list_free(&fl);
        if (depth && fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) {
            /* never through it; the rest of the tree still goes */
            fprintf(stderr, "agentsandbox: cp: %s is a symlink: not writing through it, skipped "
                    "(remove it, or copy to a directory only you can write to)\n", safe(local));
            w->skipped = 1;
            return 0;
        }
        fprintf(stderr, "agentsandbox: cp: cannot open directory %s: %s\n", safe(local),
                strerror(en));
        return EXIT_FAIL;
    }
    /* The files first, with the listing held; the directories' names
       kept apart (compactly) and the listing freed before descending. */
    for (i = 0; !rc && i < fl.count; i++) {
        char lp[4096], rp[4096];
        const char *nm = fl.entries[i].name;
        const char *p;
        int ctl = 0;
        size_t nl;
        for (p = nm; p && *p; p++) ctl |= (unsigned char)*p < 0x20 || *p == 0x7f;
        if (!nm || !*nm || strchr(nm, '/') || strcmp(nm, ".") == 0 || strcmp(nm, "..") == 0 ||
            ctl || strlen(nm) > NAME_MAX) {
            /* never let a listing write outside the target; a name with
               control bytes cannot be asked for (the library refuses such
               paths), nor one longer than a file name may be made here:
               the rest is copied, and the exit code says 1 */
            fprintf(stderr, "agentsandbox: cp: skipping the entry \"%s\" of %s%s\n", safe(nm),
                    safe(remote), ctl                    ? " (control characters in its name)"
                                  : nm && strlen(nm) > NAME_MAX ? " (a name longer than NAME_MAX)"
                                                                 : "");
            w->skipped = 1;
            continue;
        }
        if (fl.entries[i].is_dir) {
            char *grown;
            nl = strlen(nm) + 1;
            if (w->pending + nl > CP_MAX_PENDING_NAMES) {
                fprintf(stderr, "agentsandbox: cp: stopped at %s: more than %u MiB of directory "
                        "names wait to be copied (a tree without end?)\n", safe(remote),
                        CP_MAX_PENDING_NAMES >> 20);
                rc = EXIT_FAIL;
                break;
            }
            if (dlen + nl > dcap) {
                size_t nc = dcap ? dcap * 2 : 256;
                while (nc < dlen + nl) nc *= 2;
                grown = (char *)realloc(dirs, nc);
                if (!grown) {
                    rc = fail(c, ASB_ERR_OUT_OF_MEMORY, NULL, "cp: out of memory");
                    break;
                }
                dirs = grown;
                dcap = nc;
            }
            memcpy(dirs + dlen, nm, nl);
            dlen += nl;
            w->pending += nl;
            continue;
        }
        if (join_path(lp, sizeof lp, local, nm) || join_path(rp, sizeof rp, remote, nm)) {
            rc = usage_error(c, "cp: a path below %s is too long", remote);
            break;
        }
        rc = download_file(c, sb, rp, dfd, nm, lp, fl.entries[i].size, w);
        if (g_signal) rc = EXIT_CANCELLED;
    }
    asb_file_list_free(&fl);
    for (at = 0; !rc && at < dlen; at += strlen(dirs + at) + 1) {
        char lp[4096], rp[4096];
        const char *nm = dirs + at;
        if (join_path(lp, sizeof lp, local, nm) || join_path(rp, sizeof rp, remote, nm)) {
            rc = usage_error(c, "cp: a path below %s is too long", remote);
            break;
        }
        rc = download_tree(c, sb, rp, dfd, nm, lp, depth + 1, w);
        if (g_signal) rc = EXIT_CANCELLED;
    }
    w->pending -= dlen;
    free(dirs);
    close(dfd);
    return rc;
}

/* "CLAIM:PATH" -> claim in claim_out, path pointer; 0 when local. */
static int remote_spec(const char *s, char *claim_out, size_t cap, const char **path) {
    const char *colon = strchr(s, ':');
    const char *slash = strchr(s, '/');
    size_t n;
    if (!colon || colon == s) return 0;
    if (slash && slash < colon) return 0; /* ./a:b is a local file */
    n = (size_t)(colon - s);
    if (n >= cap) return 0;
    memcpy(claim_out, s, n);
    claim_out[n] = '\0';
    *path = colon + 1;
    return 1;
}

static int cmd_cp(cli *c) {
    char claim[256], other[256];
    const char *rpath = NULL, *ignored;
    asb_sandbox *sb;
    int rc, src_remote, dst_remote;
    if (c->npos != 2) return usage_error(c, "cp needs SRC and DST; one of them CLAIM:PATH");
    src_remote = remote_spec(c->pos[0], claim, sizeof claim, &rpath);
    dst_remote = remote_spec(c->pos[1], src_remote ? other : claim,
                             src_remote ? sizeof other : sizeof claim, src_remote ? &ignored : &rpath);
    if (src_remote && dst_remote)
        return usage_error(c, "cp copies between this machine and a sandbox, not sandbox to "
                              "sandbox");
    if (!src_remote && !dst_remote)
        return usage_error(c, "cp: one of SRC and DST must be CLAIM:PATH");
    if (!rpath || !*rpath) return usage_error(c, "cp: %s has no PATH after the ':'", claim);
    if (asb_claim_name_validate(claim, strlen(claim), NULL) != ASB_OK)
        return usage_error(c, "cp: \"%s\" is not a claim name", claim);
    if (dst_remote) {
        struct stat st;
        if (stat(c->pos[0], &st) != 0) {
            fprintf(stderr, "agentsandbox: cp: cannot open %s: %s\n", safe(c->pos[0]), strerror(errno));
            return errno == ENOENT ? EXIT_NOTFOUND : EXIT_FAIL;
        }
        if (S_ISDIR(st.st_mode) && !c->recursive) {
            fprintf(stderr, "agentsandbox: cp: %s is a directory\n  hint: add -r\n", safe(c->pos[0]));
            return EXIT_USAGE;
        }
        if ((rc = attach(c, claim, &sb)) != 0) return rc;
        return S_ISDIR(st.st_mode) ? upload_tree(c, sb, c->pos[0], rpath)
                                   : upload_file(c, sb, c->pos[0], rpath);
    }
    {
        const char *dst = c->pos[1];
        struct stat st;
        char target[4096];
        if ((rc = attach(c, claim, &sb)) != 0) return rc;
        if (c->recursive) {
            cp_walk w;
            if (strcmp(dst, "-") == 0) return usage_error(c, "cp -r cannot write to stdout");
            memset(&w, 0, sizeof w);
            rc = download_tree(c, sb, rpath, AT_FDCWD, dst, dst, 0, &w);
            return cp_walk_exit(rc, &w);
        }
        if (strcmp(dst, "-") != 0 && stat(dst, &st) == 0 && S_ISDIR(st.st_mode)) {
            const char *base = strrchr(rpath, '/');
            base = base ? base + 1 : rpath;
            if (!*base) return usage_error(c, "cp: %s:%s names a directory (add -r)", claim, rpath);
            if (join_path(target, sizeof target, dst, base))
                return usage_error(c, "cp: the path %s is too long", dst);
        } else if (snprintf(target, sizeof target, "%s", dst) >= (int)sizeof target) {
            return usage_error(c, "cp: the path %s is too long", dst);
        }
        return download_file(c, sb, rpath, AT_FDCWD, target, target, 0, NULL);
    }
}

/* Entries of a directory: a table, -o json (an array) or -o name. */
static void print_entries(const cli *c, const asb_file_entry *en, size_t n) {
    size_t i;
    if (structured(c)) {
        asb_buf b;
        asb_json_writer w;
        asb_buf_init(&b, NULL);
        asb_json_writer_init(&w, &b);
        w.replace_invalid_utf8 = 1;
        asb_json_array_begin(&w);
        for (i = 0; i < n; i++) {
            asb_json_object_begin(&w);
            asb_json_key(&w, "name");
            asb_json_string(&w, nz(en[i].name));
            asb_json_key(&w, "type");
            asb_json_string(&w, en[i].is_dir ? "directory" : "file");
            asb_json_key(&w, "size");
            asb_json_int64(&w, (int64_t)en[i].size);
            asb_json_key(&w, "mod_time");
            asb_json_double(&w, en[i].mod_time);
            asb_json_object_end(&w);
        }
        asb_json_array_end(&w);
        print_writer(c, &w, &b);
        return;
    }
    for (i = 0; i < n; i++) {
        if (out_is(c, "name")) {
            printf("%s%s\n", safe(en[i].name), en[i].is_dir ? "/" : "");
        } else {
            char when[32] = "-";
            struct tm tm;
            /* the sandbox's number: converted only when it is a time
               (1970 to 9999; a double outside time_t's range is undefined
               behaviour to convert, NaN fails both tests; a 32-bit
               time_t ends in 2038) */
            if (en[i].mod_time >= 0 && en[i].mod_time < 253402300800.0 &&
                (sizeof(time_t) > 4 || en[i].mod_time < 2147483648.0)) {
                time_t t = (time_t)en[i].mod_time;
                if (gmtime_r(&t, &tm)) strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &tm);
            }
            printf("%-9s %12llu  %s  %s%s\n", en[i].is_dir ? "directory" : "file",
                   (unsigned long long)en[i].size, when, safe(en[i].name), en[i].is_dir ? "/" : "");
        }
    }
}

static int cmd_ls_files(cli *c) {
    asb_sandbox *sb;
    asb_file_list fl;
    asb_call_opts co;
    asb_error e;
    asb_result r;
    int rc;
    const char *path;
    if (c->npos < 1 || c->npos > 2) return usage_error(c, "ls-files needs a CLAIM and a PATH");
    path = c->npos == 2 ? c->pos[1] : ".";
    if ((rc = attach(c, c->pos[0], &sb)) != 0) return rc;
    call_opts(c, &co);
    c->file_op = 1;
    r = asb_sandbox_list_opts(sb, path, &fl, &co, &e);
    if (r != ASB_OK) return fail(c, r, &e, "ls-files %s:%s", c->pos[0], path);
    print_entries(c, fl.entries, fl.count);
    asb_file_list_free(&fl);
    return 0;
}

/* API friction: no stat call; the parent directory is listed instead. */
static int cmd_stat(cli *c) {
    asb_sandbox *sb;
    asb_file_list fl;
    asb_call_opts co;
    asb_error e;
    asb_result r;
    char parent[4096];
    const char *base, *path;
    size_t i;
    int rc;
    if (c->npos != 2) return usage_error(c, "stat needs a CLAIM and a PATH");
    path = c->pos[1];
    if (snprintf(parent, sizeof parent, "%s", path) >= (int)sizeof parent)
        return usage_error(c, "stat: the path is too long");
    while (strlen(parent) > 1 && parent[strlen(parent) - 1] == '/') parent[strlen(parent) - 1] = '\0';
    base = strrchr(parent, '/');
    if (base) {
        parent[base - parent] = '\0';
        base = path + (base - parent) + 1;
        if (!parent[0]) snprintf(parent, sizeof parent, ".");
    } else {
        base = path;
        snprintf(parent, sizeof parent, ".");
    }
    if ((rc = attach(c, c->pos[0], &sb)) != 0) return rc;
    call_opts(c, &co);
    c->file_op = 1;
    r = asb_sandbox_list_opts(sb, parent, &fl, &co, &e);
    if (r != ASB_OK) return fail(c, r, &e, "stat %s:%s", c->pos[0], path);
    for (i = 0; i < fl.count; i++) {
        size_t bl = strcspn(base, "/");
        if (fl.entries[i].name && strlen(fl.entries[i].name) == bl &&
            strncmp(fl.entries[i].name, base, bl) == 0) {
            if (structured(c)) {
                /* one object, not an array */
                asb_buf b;
                asb_json_writer w;
                asb_buf_init(&b, NULL);
                asb_json_writer_init(&w, &b);
                w.replace_invalid_utf8 = 1;
                asb_json_object_begin(&w);
                asb_json_key(&w, "name");
                asb_json_string(&w, fl.entries[i].name);
                asb_json_key(&w, "type");
                asb_json_string(&w, fl.entries[i].is_dir ? "directory" : "file");
                asb_json_key(&w, "size");
                asb_json_int64(&w, (int64_t)fl.entries[i].size);
                asb_json_key(&w, "mod_time");
                asb_json_double(&w, fl.entries[i].mod_time);
                asb_json_object_end(&w);
                print_writer(c, &w, &b);
            } else {
                print_entries(c, &fl.entries[i], 1);
            }
            asb_file_list_free(&fl);
            return 0;
        }
    }
    asb_file_list_free(&fl);
    fprintf(stderr, "agentsandbox: stat %s:%s: no such file or directory\n  hint: list the "
                    "directory with `agentsandbox ls-files %s %s`\n",
            safe(c->pos[0]), safe(path), safe(c->pos[0]), safe(parent));
    return EXIT_NOTFOUND;
}

static int cmd_cat(cli *c) {
    asb_sandbox *sb;
    asb_call_opts co;
    int i, rc;
    if (c->npos < 2) return usage_error(c, "cat needs a CLAIM and at least one PATH");
    if ((rc = attach(c, c->pos[0], &sb)) != 0) return rc;
    c->file_op = 1;
    memset(&co, 0, sizeof co);
    co.timeout_ms = c->timeout_ms;
    co.cancel = c->cancel;
    fflush(stdout);
    for (i = 1; i < c->npos; i++) {
        asb_error e;
        asb_result r = asb_sandbox_read_to_fd_opts(sb, c->pos[i], 1, &co, &e);
        if (r != ASB_OK) {
            int one = fail(c, r, &e, "cat %s:%s", c->pos[0], c->pos[i]);
            if (!rc) rc = one;
            if (r == ASB_ERR_CANCELLED) break;
        }
    }
    return rc;
}

static int create_on(cli *c, const char *tpl, asb_sandbox **sb) {
    asb_create_opts o;
    asb_error e;
    asb_result r;
    int rc = open_client(c);
    if (rc) return rc;
    memset(&o, 0, sizeof o);
    o.namespace_name = c->ns;
    o.labels = c->labels;
    o.label_count = c->label_count;
    o.env = c->env_count ? c->env : NULL;
    o.env_count = c->env_count;
    o.shutdown_after_seconds = c->ttl_s;
    o.claim_name = c->name;
    o.cancel = c->cancel;
    o.cleanup_cancel = g_cancel_again;
    /* run: --timeout is the command's; create: the wait for Ready */
    if (strcmp(c->sub, "create") == 0) o.ready_timeout_ms = c->timeout_ms;
    if (c->warm_pool && tpl) o.warmpool = c->warm_pool; /* v1alpha1 policy */
    else if (c->warm_pool) o.warm_pool = c->warm_pool;  /* v1beta1 pool ref */
    g_creating = 1;
    r = asb_client_create_sandbox(c->client, tpl, &o, sb, &e);
    g_creating = 0;
    if (r == ASB_ERR_CANCELLED) {
        /* the library's message says whether the claim it made is gone or
           names the one its delete was stopped on (a second signal) */
        fprintf(stderr, "agentsandbox: create cancelled: %s\n", safe(e.message));
        if (asb_cancel_is_triggered(g_cancel_again)) {
            const char *ns = safe(c->ns ? c->ns : asb_client_namespace(c->client));
            fprintf(stderr, "  hint: `agentsandbox ls -n %s` lists the claims there; `agentsandbox "
                            "rm -n %s CLAIM` deletes one\n", ns, ns);
        }
        return EXIT_CANCELLED;
    }
    if (r != ASB_OK)
        return fail(c, r, &e, "cannot create a sandbox from %s %s in namespace %s",
                    tpl ? "template" : "warm pool", tpl ? tpl : c->warm_pool, c->ns);
    return 0;
}

static int cmd_create(cli *c) {
    asb_sandbox *sb;
    int rc;
    const char *tpl = c->npos ? c->pos[0] : NULL;
    if (c->npos > 1) return usage_error(c, "create takes one TEMPLATE");
    if (!tpl && !c->warm_pool) return usage_error(c, "create needs a TEMPLATE or --warm-pool");
    if (c->ncmd) return usage_error(c, "create runs nothing: use run TEMPLATE -- CMD");
    if ((rc = create_on(c, tpl, &sb)) != 0) return rc;
    if (structured(c)) {
        asb_buf b;
        asb_json_writer w;
        asb_buf_init(&b, NULL);
        asb_json_writer_init(&w, &b);
        asb_json_object_begin(&w);
        asb_json_key(&w, "claim");
        asb_json_string(&w, nz(asb_sandbox_claim_name(sb)));
        asb_json_key(&w, "sandbox");
        asb_json_string(&w, nz(asb_sandbox_name(sb)));
        asb_json_key(&w, "namespace");
        asb_json_string(&w, nz(asb_sandbox_namespace(sb)));
        asb_json_key(&w, "pod");
        asb_json_string(&w, nz(asb_sandbox_pod_name(sb)));
        asb_json_object_end(&w);
        print_writer(c, &w, &b);
    } else if (out_is(c, "name")) {
        printf("sandboxclaim/%s\n", safe(asb_sandbox_claim_name(sb)));
    } else {
        printf("%s\n", safe(asb_sandbox_claim_name(sb)));
    }
    /* the sandbox outlives this process: close, never delete */
    asb_sandbox_close_connection(sb);
    return 0;
}

static int cmd_run(cli *c) {
    asb_sandbox *sb;
    asb_call_opts co;
    asb_error e;
    asb_result r;
    int rc;
    const char *tpl = c->npos ? c->pos[0] : NULL;
    if (c->npos > 1) return usage_error(c, "run takes one TEMPLATE, then -- and the command");
    if (!tpl && !c->warm_pool) return usage_error(c, "run needs a TEMPLATE or --warm-pool");
    if (c->ncmd < 1) return usage_error(c, "run needs a command after --");
    if ((rc = create_on(c, tpl, &sb)) != 0) return rc;
    if (c->verbosity) fprintf(stderr, "agentsandbox: claim %s created\n", safe(asb_sandbox_claim_name(sb)));
    rc = run_on(c, sb);
    /* not cancelled by the first signal: the delete must happen; a second
       one stops waiting for it */
    if (g_signal)
        fprintf(stderr, "agentsandbox: deleting claim %s (namespace %s); Ctrl-C again to stop "
                        "waiting\n", safe(asb_sandbox_claim_name(sb)), safe(asb_sandbox_namespace(sb)));
    memset(&co, 0, sizeof co);
    co.cancel = g_cancel_again;
    g_cleanup = 1;
    r = asb_sandbox_terminate_opts(sb, &co, &e);
    if (r == ASB_ERR_CANCELLED) {
        fprintf(stderr, "agentsandbox: stopped waiting for the delete: claim %s in namespace %s "
                        "may be left behind\n  hint: delete it with `agentsandbox rm -n %s %s`\n",
                safe(asb_sandbox_claim_name(sb)), safe(asb_sandbox_namespace(sb)),
                safe(asb_sandbox_namespace(sb)), safe(asb_sandbox_claim_name(sb)));
        return EXIT_CANCELLED;
    }
    if (r != ASB_OK) {
        int drc = fail(c, r, &e, "cannot delete claim %s in namespace %s (delete it with "
                       "`agentsandbox rm -n %s %s`)", nz(asb_sandbox_claim_name(sb)),
                       nz(asb_sandbox_namespace(sb)), nz(asb_sandbox_namespace(sb)),
                       nz(asb_sandbox_claim_name(sb)));
        if (!rc) rc = drc;
    }
    if (g_signal) rc = EXIT_CANCELLED;
    return rc;
}

/* ---- shell completion ------------------------------------------------------------ */

/* Commands and flags from the tables above; claim names from a live
   `agentsandbox ls -o name` (with the same -n/--context/--kubeconfig). */
static const char *const COMPLETION_BASH =
    "_agentsandbox() {\n"
    "    local cur prev i sub= flags=()\n"
    "    cur=${COMP_WORDS[COMP_CWORD]}; prev=${COMP_WORDS[COMP_CWORD-1]}\n"
    "    for ((i = 1; i < COMP_CWORD; i++)); do\n"
    "        case ${COMP_WORDS[i]} in\n"
    "            --) return 0 ;;\n"
    "            -n|--namespace|--context|--kubeconfig) flags+=(\"${COMP_WORDS[i]}\" \"${COMP_WORDS[i+1]}\"); i=$((i+1)) ;;\n"
    "            --connect|--router-namespace|-o|--output|-l|--selector|--label|--env|--ttl|--timeout|--name|--warm-pool) i=$((i+1)) ;;\n"
    "            -*) ;;\n"
    "            *) [ -z \"$sub\" ] && sub=${COMP_WORDS[i]} ;;\n"
    "        esac\n"
    "    done\n"
    "    case $prev in\n"
    "        -o|--output) COMPREPLY=($(compgen -W 'json yaml name wide' -- \"$cur\")); return 0 ;;\n"
    "        --connect) COMPREPLY=($(compgen -W 'tunnel native direct= gateway= in-cluster' -- \"$cur\")); return 0 ;;\n"
    "        --kubeconfig) COMPREPLY=($(compgen -f -- \"$cur\")); return 0 ;;\n"
    "        -n|--namespace|--context|--router-namespace|-l|--selector|--label|--env|--ttl|--timeout|--name|--warm-pool) return 0 ;;\n"
    "    esac\n"
    "    if [ -z \"$sub\" ]; then\n"
    "        COMPREPLY=($(compgen -W 'create get status ls rm exec cp cat ls-files stat run version completion help --kubeconfig --context --namespace --connect --router-namespace --output --help' -- \"$cur\"))\n"
    "        return 0\n"
    "    fi\n"
    "    case $cur in -*)\n"
    "        COMPREPLY=($(compgen -W '--label --env --ttl --timeout --warm-pool --name --selector --all-namespaces --all --recursive --stdin --tty --output --namespace --help' -- \"$cur\"))\n"
    "        return 0 ;;\n"
    "    esac\n"
    "    case $sub in\n"
    "        get|status|rm|exec|cat|ls-files|stat)\n"
    "            COMPREPLY=($(compgen -W \"$(\"${COMP_WORDS[0]}\" \"${flags[@]}\" ls -o name 2>/dev/null | sed 's|^sandboxclaim/||')\" -- \"$cur\")) ;;\n"
    "        cp) COMPREPLY=($(compgen -f -- \"$cur\")) ;;\n"
    "        completion) COMPREPLY=($(compgen -W 'bash zsh' -- \"$cur\")) ;;\n"
    "    esac\n"
    "    return 0\n"
    "}\n"
    "complete -F _agentsandbox agentsandbox\n";

static int cmd_completion(cli *c) {
    if (c->npos != 1 || (strcmp(c->pos[0], "bash") != 0 && strcmp(c->pos[0], "zsh") != 0))
        return usage_error(c, "completion needs a shell: bash or zsh");
    /* zsh runs the bash function through its bashcompinit layer, with
       0-based arrays (ksharrays) as the function indexes COMP_WORDS the
       bash way; without it every word was off by one */
    if (strcmp(c->pos[0], "zsh") == 0) {
        const char *reg = strstr(COMPLETION_BASH, "complete -F");
        fputs("autoload -U +X compinit && compinit\nautoload -U +X bashcompinit && bashcompinit\n",
              stdout);
        fwrite(COMPLETION_BASH, 1, (size_t)(reg - COMPLETION_BASH), stdout);
        fputs("_agentsandbox_zsh() {\n    setopt localoptions ksharrays\n    _agentsandbox \"$@\"\n}\n"
              "complete -F _agentsandbox_zsh agentsandbox\n",
              stdout);
        return 0;
    }
    fputs(COMPLETION_BASH, stdout);
    return 0;
}

int main(int argc, char **argv) {
    cli c;
    asb_error e;
    struct sigaction sa;
    asb_cancel *again_tok = NULL;
    int rc;
    g_umask = umask(077);
    umask(g_umask);
    memset(&c, 0, sizeof c);
    rc = parse_args(&c, argc, argv);
    if (rc) goto out;
    if (!c.sub) {
        if (c.help) {
            fputs(USAGE, stdout);
            goto out;
        }
        fputs(USAGE, stderr);
        rc = EXIT_USAGE;
        goto out;
    }
    if (strcmp(c.sub, "help") == 0) {
        const char *h = c.npos ? help_for(c.pos[0]) : NULL;
        fputs(h ? h : USAGE, stdout);
        goto out;
    }
    if (!help_for(c.sub)) {
        const char *unknown = c.sub;
        c.sub = NULL;
        rc = usage_error(&c, "unknown command \"%s\"", unknown);
        goto out;
    }
    if (c.help) {
        fputs(help_for(c.sub), stdout);
        goto out;
    }
    /* Ctrl-C and SIGTERM cancel the call in flight (the library polls the
       token beside its socket); run then still deletes its claim. */
    if (asb_cancel_create(NULL, &c.cancel, &e) != ASB_OK) {
        rc = fail(&c, e.code, &e, "cannot set up cancellation");
        goto out;
    }
    if (asb_cancel_create(NULL, &again_tok, &e) != ASB_OK) {
        rc = fail(&c, e.code, &e, "cannot set up cancellation");
        goto out;
    }
    g_cancel_again = again_tok;
    g_cancel = c.cancel;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    /* A closed terminal or a dropped ssh session (SIGHUP), and SIGQUIT,
       end the tool as SIGINT does, so run still deletes its claim (their
       default action killed it first). Not where they were ignored when
       the tool started (nohup): that stays. With no terminal left, what
       is written to it fails quietly (SIGPIPE is ignored). */
    {
        static const int more[] = {SIGHUP, SIGQUIT};
        size_t i;
        for (i = 0; i < 2; i++) {
            struct sigaction old;
            if (sigaction(more[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
                sigaction(more[i], &sa, NULL);
        }
    }
    signal(SIGPIPE, SIG_IGN);

    if (strcmp(c.sub, "version") == 0) rc = cmd_version(&c);
    else if (strcmp(c.sub, "get") == 0 || strcmp(c.sub, "status") == 0) rc = cmd_get(&c);
    else if (strcmp(c.sub, "ls") == 0) rc = cmd_ls(&c);
    else if (strcmp(c.sub, "rm") == 0) rc = cmd_rm(&c);
    else if (strcmp(c.sub, "exec") == 0) rc = cmd_exec(&c);
    else if (strcmp(c.sub, "cp") == 0) rc = cmd_cp(&c);
    else if (strcmp(c.sub, "cat") == 0) rc = cmd_cat(&c);
    else if (strcmp(c.sub, "ls-files") == 0) rc = cmd_ls_files(&c);
    else if (strcmp(c.sub, "completion") == 0) rc = cmd_completion(&c);
    else if (strcmp(c.sub, "stat") == 0) rc = cmd_stat(&c);
    else if (strcmp(c.sub, "create") == 0) rc = cmd_create(&c);
    else if (strcmp(c.sub, "run") == 0) rc = cmd_run(&c);
out:
    fflush(stdout);
    asb_client_free(c.client); /* stops the tunnel; sandboxes keep running */
    /* The work is done and no library thread is left: a late signal is
       ignored rather than run a handler on a token being freed (setting
       the pointers to NULL first was not enough: the compiler may sink
       the store past an inlined free, and a handler may have loaded the
       pointer already). */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    sigaction(SIGQUIT, &sa, NULL);
    g_cancel = NULL;
    g_cancel_again = NULL;
    asb_cancel_free(c.cancel);
    asb_cancel_free(again_tok);
    free(c.pos);
    return rc;
}
