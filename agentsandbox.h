/* agentsandbox.h - v0.1.0 - agent sandboxes on Kubernetes, from C.

   A single-file library in the stb tradition for creating, using and tearing
   down agent sandboxes (kubernetes-sigs/agent-sandbox) from a C or C++
   program. No runtime beyond libc, mbedTLS and, for the local tunnel,
   `kubectl`.

   ===========================================================================
   DO THIS
   ===========================================================================

   In exactly one C or C++ file of your program:

       #define AGENTSANDBOX_IMPLEMENTATION
       #include "agentsandbox.h"

   Everywhere else, include it without the define. Link with mbedTLS
   (2.28 and 3.6 both work; on Debian: apt-get install libmbedtls-dev):

       cc -std=c99 app.c -lmbedtls -lmbedx509 -lmbedcrypto -pthread

   or build without TLS (plain HTTP only; no mbedTLS needed) by defining
   ASB_TLS to 0 in every file that includes the header.

   ===========================================================================
   QUICK START: a sandbox from start to finish
   ===========================================================================

   This program is examples/quickstart.c, which make test runs against a
   real cluster (and checks that this copy is the same program):

       // Create a sandbox, run a command, write a file, read it back, delete it.
       // Needs a cluster with agent-sandbox, kubectl on PATH and a kubeconfig
       // ($KUBECONFIG, else ~/.kube/config).
       // Usage: ./quickstart [template | pool:<warm pool> (agent-sandbox v0.5+)]
       #define AGENTSANDBOX_IMPLEMENTATION
       #include "agentsandbox.h"
       #include <stdio.h>
       #include <string.h>

       int main(int argc, char **argv) {
           const char *tpl = argc > 1 ? argv[1] : "python-sandbox-template";
           asb_client_desc desc;
           asb_create_opts opts;
           asb_client *client;
           asb_sandbox *sb;
           asb_run_result run;
           asb_buf file;
           asb_error err;
           int rc = 1;

           memset(&desc, 0, sizeof desc); // defaults: kubeconfig, kubectl tunnel
           memset(&opts, 0, sizeof opts); // defaults: the context's namespace, ...
           if (strncmp(tpl, "pool:", 5) == 0) {
               opts.warm_pool = tpl + 5; // v1beta1 claims come from a warm pool
               tpl = NULL;
           }
           if (asb_client_create(&desc, &client, &err) != ASB_OK) {
               fprintf(stderr, "client: %s\n", err.message);
               return 1;
           }
           if (asb_client_create_sandbox(client, tpl, &opts, &sb, &err) != ASB_OK) {
               fprintf(stderr, "create: %s\n", err.message);
               asb_client_free(client);
               return 1;
           }
           printf("sandbox %s is ready\n", asb_sandbox_name(sb));

           asb_buf_init(&file, NULL);
           if (asb_sandbox_run(sb, "echo hello from the sandbox", 60000, &run,
                               &err) != ASB_OK) {
               fprintf(stderr, "run: %s\n", err.message);
               goto out;
           }
           printf("run: exit %d, stdout: %s", run.exit_code, run.out.ptr);
           if (asb_sandbox_write(sb, "notes/hello.txt", "written from C\n", 15,
                                 &err) != ASB_OK) {
               fprintf(stderr, "write: %s\n", err.message);
               goto out;
           }
           if (asb_sandbox_read(sb, "notes/hello.txt", &file, &err) != ASB_OK) {
               fprintf(stderr, "read: %s\n", err.message);
               goto out;
           }
           printf("read back: %s", file.ptr);
           rc = 0;
       out:
           asb_run_result_free(&run); // always: asb_sandbox_run set it up
           asb_buf_free(&file);
           if (asb_sandbox_terminate(sb, &err) != ASB_OK) { // deletes the claim
               fprintf(stderr, "delete: %s\n", err.message);
               rc = 1;
           } else {
               printf("sandbox deleted\n");
           }
           asb_client_free(client);
           return rc;
       }

   Build and run it:

       cc -std=c99 quickstart.c -o quickstart -lmbedtls -lmbedx509 \
          -lmbedcrypto -pthread
       ./quickstart

   It needs three things: a kubeconfig for a cluster with agent-sandbox and
   its sandbox router installed, a SandboxTemplate of that name in the
   kubeconfig context's namespace ("default" when it names none), and `kubectl` on PATH (for the tunnel to the
   router). From agent-sandbox v0.5 on, claims come from a SandboxWarmPool
   instead of naming a template: run it as ./quickstart pool:<pool name>
   (the program then passes NULL for the template and sets
   asb_create_opts.warm_pool; TROUBLESHOOTING shows the error otherwise). `make demo` in the repository builds such a cluster on this
   machine and runs the program against it. When a call fails, its
   asb_error says why in err.message; the errors a new user meets first
   (no kubeconfig, no kubectl, no router, no template, RBAC, TLS) are
   listed with what to do under TROUBLESHOOTING below.

   Ownership in three lines: asb_client_free frees every handle the client
   made; asb_sandbox_terminate deletes the sandbox (its claim) but the
   handle stays the client's until asb_client_free; every result struct or
   buffer the library fills has one matching _free (asb_run_result_free,
   asb_buf_free, ...), to call whatever the call returned.

   ===========================================================================
   CONNECTING: the five ways to reach a sandbox
   ===========================================================================

   Claims are always created and deleted through the Kubernetes API. The
   calls to the sandbox itself (run, files) travel one of five ways, set
   in asb_client_desc.mode; each has an example program:

     ASB_CONNECT_LOCAL_TUNNEL  the default: one `kubectl port-forward` per
                               client to the router Service
                               (router_namespace, router_service,
                               router_port); examples/local_tunnel.c
     ASB_CONNECT_DIRECT        a router URL you can reach (direct_url;
                               router_token, sandbox_tls for https);
                               examples/direct_url.c
     ASB_CONNECT_GATEWAY       the router behind a Gateway (gateway_name,
                               gateway_namespace, gateway_port,
                               gateway_https); examples/gateway.c
     ASB_CONNECT_IN_CLUSTER    from a pod straight to the sandbox pod, no
                               router (kube.in_cluster = 1 for the pod's
                               service account); examples/in_cluster.c
     ASB_CONNECT_NATIVE_TUNNEL the router Service through the apiserver's
                               port-forward from inside the process (as
                               the local tunnel, without kubectl: nothing
                               is spawned); examples/native_tunnel.c

   and a sixth for programs that run beside sandboxd in its pod (the
   sidecar layout), with no Kubernetes API and no claim:

     ASB_CONNECT_IN_POD        sandboxd on SANDBOXD_REST_ADDR and
                               SANDBOXD_GRPC_ADDR (or sandboxd_rest_addr /
                               _grpc_addr); the handle is
                               asb_client_sandbox_in_pod's (RUNTIMES)

   examples/attach.c picks up a sandbox another process created;
   examples/bigfile.c streams large files in flat memory.

   ===========================================================================
   RUNTIMES: legacy and sandboxd
   ===========================================================================

   The server in the sandbox is one of two, set in asb_client_desc.runtime;
   the handle calls (run, write, read, list, exists and their _opts and
   stream forms) behave the same on both:

     ASB_RUNTIME_LEGACY    the default: the HTTP/1.1 JSON runtime
                           (/execute, /upload, ...) on server_port, through
                           any of the four modes above
     ASB_RUNTIME_SANDBOXD  sandboxd (KEP-539.2): files over REST on
                           sandboxd_rest_port (8080), processes over gRPC
                           on sandboxd_grpc_port (9090); run is
                           /bin/sh -c <command>, as the Python SDK 1.0.8
                           runs it. sandboxd listens on the pod's loopback,
                           so it is reached by ASB_CONNECT_LOCAL_TUNNEL
                           (then `kubectl port-forward pod/<pod> :8080
                           :9090`, one per sandbox, stopped with the
                           handle), ASB_CONNECT_IN_CLUSTER (the pod IP,
                           for sandboxd builds that listen beyond
                           loopback) or ASB_CONNECT_IN_POD (a program
                           beside sandboxd in its pod: SANDBOXD_REST_ADDR
                           and SANDBOXD_GRPC_ADDR, no Kubernetes API,
                           asb_client_sandbox_in_pod)
     ASB_RUNTIME_AUTO      per sandbox: sandboxd when its pod spec declares
                           it (SANDBOXD_*_ADDR or a container "sandboxd")

   Only sandboxd has streaming processes (asb_sandbox_process_start: output
   through a callback as it comes, stdin, signals, a PTY and its size),
   run with env and cwd, file delete, stat, write with a file mode and its
   metadata; the legacy runtime answers those with ASB_ERR_UNSUPPORTED.
   asb_sandbox_runtime says which one a handle has.

   ===========================================================================
   LOWER LAYERS, for power users
   ===========================================================================

   Each layer under the client is public and usable alone: the JSON
   tokenizer, lookup and writer (search "JSON"), the HTTP/1.1 client with
   TLS, pooling and retries ("HTTP AND TLS"), the YAML and kubeconfig
   readers and a Kubernetes REST and watch client ("KUBERNETES"), and the
   SDK's small rules ("RULES"). DESIGN lists them all.

   ===========================================================================
   TABLE OF CONTENTS
   ===========================================================================

       Quick start, connection modes ... search "QUICK START", "CONNECTING"
       legacy runtime and sandboxd ..... search "RUNTIMES"
       Compile-time options ............ search "OPTIONS"
       Memory, errors, logging, threads  search "CONVENTIONS"
       Many sandboxes from one client .. search "CONCURRENCY"
       The design of the whole API ..... search "DESIGN"
       JSON ............................ search "JSON"
       HTTP/1.1 and TLS ................ search "HTTP AND TLS"
       HTTP/2, gRPC, protobuf .......... search "HTTP2 AND GRPC"
       kubeconfig, Kubernetes .......... search "KUBERNETES"
       WebSocket, port-forward ......... search "PORT-FORWARD"
       Small rules (paths, labels, ...)  search "RULES"
       Tracing, latency histograms ..... search "TRACING"
       The first errors, what to do .... search "TROUBLESHOOTING"
       Deadlines, cancel tokens ........ search "DEADLINES AND CANCELLATION"
       Connectors, runtimes (internal) . search "CONNECTORS AND RUNTIMES"
       Declarations, a comment each .... after this comment, in this order:
                                         results and errors, logging,
                                         memory, JSON, rules, YAML, HTTP,
                                         HTTP/2 and gRPC, kubeconfig,
                                         Kubernetes, WebSocket and
                                         port-forward, tracing,
                                         sandboxes, TLS backend
       Implementation banners .......... search ">>platform", ">>bytes",
                                         ">>json", ">>rules", ">>yaml",
                                         ">>kubeconfig", ">>http", ">>tls",
                                         ">>http (client)", ">>http2",
                                         ">>grpc", ">>protobuf", ">>kube",
                                         ">>websocket", ">>portforward",
                                         ">>trace", ">>sandbox (types)",
                                         ">>tunnel",
                                         ">>connector: local tunnel",
                                         ">>connector: direct",
                                         ">>connector: gateway",
                                         ">>connector: in-cluster",
                                         ">>connector: native tunnel",
                                         ">>connector: sandboxd pod tunnel",
                                         ">>connector: in-pod",
                                         ">>runtime: legacy",
                                         ">>runtime: sandboxd", ">>sandbox"
       License ......................... end of file

   ===========================================================================
   OPTIONS
   ===========================================================================

   Feature switches are 0/1 macros tested with #if (so -Wundef catches a
   typo). Limits are overridable; the tests also run with tiny ones.

     macro                   default  where        meaning
     ----------------------  -------  -----------  -------------------------
     ASB_TLS                 1        everywhere   0 builds without mbedTLS:
                                                   https URLs then fail with
                                                   ASB_ERR_TLS_UNAVAILABLE.
     ASB_STATIC              undef    everywhere   define to make every
                                                   public function static
                                                   (private copy per file).
     ASB_JSON_MAX_DEPTH      1024     everywhere   deepest JSON nesting the
                                                   tokenizer accepts; deeper
                                                   input is ASB_JSON_ERROR_INVAL.
     ASB_JSON_MAX_DOC_TOKENS 16777216 impl. file   most tokens
                                                   asb_json_doc_parse() will
                                                   allocate for one document.
     ASB_YAML_MAX_DEPTH      64       impl. file   deepest YAML nesting
                                                   asb_yaml_parse() accepts;
                                                   deeper is ASB_ERR_KUBECONFIG
                                                   ("nesting too deep").
     ASB_YAML_MAX_ALIAS_NODES 65536   impl. file   nodes all aliases and
                                                   merges of one document
                                                   may stand for ("too much
                                                   aliasing" past it).
     ASB_YAML_MAX_ANCHORS    1024     impl. file   anchors one document may
                                                   define.
     ASB_TRACING             1        impl. file   0 builds without the tracer
                                                   (>>trace): every hook compiles
                                                   to nothing; tracer.enable is
                                                   then ASB_ERR_INVALID_ARGUMENT.
     ASB_H2_MAX_QUEUED_REPLIES 1000   impl. file   unsent PING/SETTINGS ACKs and
                                                   RST_STREAMs before an HTTP/2
                                                   peer counts as flooding.
     ASB_PSA_EXTERNAL_RNG    1        impl. file   with an mbedTLS built with
                                                   MBEDTLS_PSA_CRYPTO_EXTERNAL_RNG,
                                                   the header defines its
                                                   mbedtls_psa_external_get_random
                                                   (getrandom, /dev/urandom);
                                                   0: you define it.

   ===========================================================================
   CONVENTIONS
   ===========================================================================

   Memory. Every allocation goes through an asb_allocator (three functions
   and a user_data pointer); a NULL allocator means libc malloc/realloc/free.
   Supplying only some of the three functions is ASB_ERR_INVALID_ARGUMENT.
   One ownership rule: the library copies what it keeps, and whatever it
   hands back has exactly one matching _free. Borrowed views (asb_str) say
   how long they live. The library never takes over a caller's pointer.
   Memory that held a secret (kubeconfig text, tokens, keys, passwords, an
   exec plugin's output, a request head with Authorization) is overwritten
   before it goes back to free_fn, growth included (such a buffer grows by
   alloc, copy, wipe, free, never by realloc_fn), so a core dump or the
   next user of the block finds no credential in it.

   Errors. Every fallible call returns an asb_result: ASB_OK (0) on success,
   a negative code otherwise, grouped by layer (see asb_result).
   asb_result_str() names a code. Calls that can say more fill an optional
   asb_error (pass NULL if you do not care): the code again, a readable
   message, and where they apply the HTTP status, the Kubernetes Status
   reason and the first bytes of an unexpected body. Messages never contain
   tokens, keys or passwords.

   mbedTLS allocates with its own calloc/free; routing it elsewhere is
   process-wide (mbedtls_platform_set_calloc_free), so the library leaves
   that choice to the program.

   The JSON tokenizer alone keeps jsmn's convention (a token count, or one of
   ASB_JSON_ERROR_NOMEM / _INVAL / _PART), so code written for jsmn ports by
   renaming.

   Logging. Nothing is printed by default. Give an asb_logger (a callback,
   its user_data and a minimum level) in asb_client_desc.log, or in
   asb_http_client_desc.log for the lower layers alone, and every record
   arrives as {level, id, message}. The ids are stable; the messages are for
   people and may change:
     sandbox.create   INFO a claim is Ready (claim, sandbox, milliseconds);
                      ERROR a create failed (its claim already deleted)
     sandbox.delete   INFO a claim deleted; ERROR a delete failed
     sandbox.run      DEBUG a command ran: executable base name, exit code,
                      output sizes; ERROR it failed
     sandbox.call     DEBUG every runtime request (method, path, status,
                      milliseconds, X-Request-ID, attempts); ERROR a failure
     sandbox.pod_ip   WARN the pod IP lookup was refused: header turned off,
                      or in-cluster calls use Service names from then on
     sandbox.process  DEBUG a streaming process started (id, PTY) and
                      exited (code)
     sandbox.runtime  WARN ASB_RUNTIME_AUTO found sandboxd in a pod spec that
                      the client's mode cannot reach: the legacy runtime
     tunnel.start     INFO kubectl port-forward ready (pid, port, ms)
     tunnel.exited    WARN kubectl died (its stderr); a new one follows
     gateway.address  INFO the Gateway address chosen
     gateway.address_rejected  WARN an address that is not an IP or host
     kube.watch.reconnect  WARN a watch resumes after a drop or a 5xx/429
     kube.watch.gone  INFO 410 Gone: the watch starts again from "0"
     kube.informer    DEBUG a namespace's shared watch lists and starts;
                      INFO it met 410 Gone and lists afresh
     kube.exec        DEBUG an exec credential plugin runs (base name only)
     kube.credentials.refresh  INFO a 401: the plugin runs again
     portforward.resolved  DEBUG a Service resolved to a pod and port
     portforward.stream.failed  WARN a port-forward stream ended with an
                      error (the error channel's text, or a drop)
     http.retry       WARN a request is retried (status or error, attempt)
     http.stale       DEBUG a pooled connection had been closed: resent
     http.hold        DEBUG a request to an apiserver waits: it answered
                      429 to another request of the client (Retry-After)
     http2.stream     DEBUG an HTTP/2 stream opened (id, method, path)
     http2.goaway     INFO/WARN the server sent GOAWAY (code, last stream,
                      its first 60 bytes of debug text, quoted)
     http2.error      WARN we ended the connection: a protocol error
     http2.closed     WARN the connection was lost or closed by the peer
     otel.export      WARN an OTLP export failed, its batch dropped (once
                      per run of failures: logged again after a success)
     otel.drop        WARN the exporter's queue was full: spans dropped
                      (the first of a run; the total at asb_client_free)
   Records never carry tokens, header values, request or response bodies,
   file contents or a command's arguments and environment.

   Thread safety. Nothing is global: no process-wide init, no hidden state.
   Functions touch only the objects passed to them, so different objects
   may be used from different threads at once; one object (a writer, a doc
   being parsed) from one thread at a time. Reading an already parsed
   asb_json_doc from several threads is safe. The three clients are the
   exceptions by design: several threads may run calls on one
   asb_http_client, asb_kube_client or asb_client at once (their pools,
   credentials, registries and tunnels are locked), each thread driving
   its own sandbox handles; create and free a client from one thread, when
   no call on it is running.

   Signals. The library never raises SIGPIPE (MSG_NOSIGNAL / SO_NOSIGPIPE)
   and installs no signal handlers. Every descriptor it opens is
   close-on-exec.

   Platforms. Tested (make test): Linux with glibc on x86-64 and i386,
   with musl on x86-64 (static); gcc, clang and tcc, C99, C11 and C++11;
   under qemu-user (make test-cross) aarch64, armhf and big-endian s390x.
   All with TLS except tcc (ASB_TLS 0). Written for but not tested: macOS
   and FreeBSD (POSIX.1-2008; SO_NOSIGPIPE on macOS, /dev/urandom where
   getrandom is missing). Not supported: Windows. Static builds, sizes
   and the 32 KiB stack figure: the README's "Use in your build".

   Reading a declaration. Every public function has a comment right above
   it (or above the run of declarations that share it), in one form: what
   the call does and what its NULL or 0 arguments default to; then, where
   there is something to say, "Errors:" the codes it returns for its own
   reasons, "Ownership:" what the caller must free (and with which _free)
   or how long a borrowed result lives, and "Threads:" where the rule
   above is not the whole story. What a comment leaves out follows these
   rules: any call may also fail with ASB_ERR_INVALID_ARGUMENT (a NULL or
   malformed argument; the message says which) and ASB_ERR_OUT_OF_MEMORY;
   an output struct a call fills on success is the caller's to free with
   its _free (after a failure only where the comment says so); strings and
   structs passed in are only read during the call, and copied when kept,
   never adopted.
   tools/check_docs.py (in make test) fails when a declaration has none.

   ===========================================================================
   CONCURRENCY: many sandboxes from one client
   ===========================================================================

   One asb_client per program (per set of credentials) is the model, used
   from as many threads as you like: each thread creates and drives its
   own sandboxes (one handle from one thread at a time), or one call
   creates many:

       asb_create_result res[500];
       asb_create_opts o = {0};
       o.warm_pool = "python-sandbox-warmpool";  // or a template name below
       r = asb_client_create_sandboxes(client, NULL, &o, 500, 500, res, &err);
       // res[i].sandbox: a ready handle, or NULL and res[i].error says why

   What one client shares among all its threads and sandboxes:

     - One watch per namespace. Every create (and every wait for Ready)
       registers its claim's name with the client's shared watch of that
       namespace (an informer in the Kubernetes layer: one list, then one
       watch from its resourceVersion with bookmarks), instead of opening a
       watch of its own: the apiserver sees one WATCH per namespace and
       client, whatever the number of creates (make test-scale-cluster
       reads it from the apiserver's /metrics: 500 creates, one watch).
       The watch resumes from its resourceVersion after a drop or a
       restarting apiserver; after 410 Gone it lists the namespace afresh,
       and a claim that vanished meanwhile fails its create at once
       (ASB_ERR_METADATA, "deleted while the watch was away") instead of at
       its deadline. Its thread runs while creates wait and 2 s longer (a
       create right after another needs no new list), then ends; it needs
       `list` and `watch` on sandboxclaims in the namespace. Without `list`
       (RBAC), each create falls back to a watch of its own claim.
     - Connection pools: the apiserver's keeps kube.http.max_idle_connections
       (default 8) open for reuse, the router's likewise; a batch grows both
       to its thread count (up to 32; at most 256 kept ever), so posts,
       gets and deletes reuse connections instead of a TLS handshake each.
       A request beyond the kept ones opens a connection and closes it after.
     - One tunnel (kubectl port-forward) to the router, whatever the number
       of sandboxes.
     - Back-pressure: an apiserver that sheds load (429 Too Many Requests,
       from max-requests-inflight or API Priority and Fairness, with
       Retry-After) is waited out per kube.http.retry (5 attempts; the
       server's Retry-After when longer than the backoff, up to
       max_retry_after_ms); a 429 is retried for POSTs too, as the
       apiserver answers it before any handler runs. The shared watch
       waits out 429 and 5xx answers the same way.

   asb_client_create_sandboxes bounds the creates in flight (claims posted
   and not yet Ready) by max_in_flight, and runs them on at most 32
   threads (the caller's among them): a create that waits for Ready holds
   no thread, no connection and no watch, only a few KiB of state. Each
   create keeps every promise of asb_client_create_sandbox (no orphan
   claim on failure, the same errors). Measured on 2 cores with the local
   control plane: see the README's "What make bench measured".

   ===========================================================================
   DESIGN (the whole public API)
   ===========================================================================

   The layers of the library and how they fit. Everything named here is
   declared below, implemented and tested. There is deliberately no hook
   that runs at exit: the library keeps no global state, so cleanup at exit
   is your own atexit() function calling asb_client_free (with
   asb_client_desc.cleanup_on_free set, that deletes the claims too).

   Layers, bottom up, each usable on its own by a power user:

     JSON        asb_json_parse (jsmn-shaped tokenizer), asb_json_doc (owns
                 tokens), asb_json_find / _member / _iter (lookup),
                 asb_json_get_* (typed getters), asb_json_writer (builder).
     rules       asb_path_normalize, asb_label_validate_*,
                 asb_claim_name_generate, asb_shutdown_time_from_ttl,
                 asb_percent_encode_segment, asb_base64_*, asb_time_*.
     HTTP        asb_url_parse; asb_http_client (pool of keep-alive
                 connections per endpoint and TLS config; connect / idle /
                 overall timeouts); asb_http_request {method, url, headers,
                 body from memory or a read callback} -> asb_http_response
                 {status, headers, body into a capped buffer or streamed to
                 a write callback}; asb_retry_policy (5 attempts, 0.5 s
                 exponential backoff with jitter or the server's
                 Retry-After, only idempotent requests, a POST only when it
                 never reached the server); redirects are
                 errors (ASB_ERR_HTTP_REDIRECT); proxies via CONNECT.
     TLS         asb_tls_config {ca_file, ca_dir, ca_data, client
                 cert/key, server_name override, insecure}; verification
                 on by default, TLS 1.2 at least, IP-address SANs checked
                 by the library.
     HTTP/2      asb_h2_connect (h2c or TLS + ALPN h2; one I/O thread per
                 connection) -> asb_h2_stream_open / _write / _read /
                 _cancel; flow control, HPACK, GOAWAY.
     gRPC        asb_grpc_call_start / _run (messages to a callback, one
                 final call) / _cancel, asb_grpc_unary; asb_pb_* (the
                 protobuf wire format).
     cancel      asb_cancel: a token any thread (or a signal handler)
                 triggers to end the blocking calls that hold it with
                 ASB_ERR_CANCELLED (asb_http_request.cancel,
                 asb_call_opts.cancel).
     HTTP/2      asb_h2_connect (h2c or TLS with ALPN h2) and streams
                 (asb_h2_stream_*); asb_grpc_call_* and asb_grpc_unary over
                 them; asb_pb_* for the protobuf wire format. See "HTTP2
                 AND GRPC".
     kubeconfig  asb_yaml_parse (the YAML reader); asb_kubeconfig_load(desc)
                 -> asb_kube_config {server, CA, client certificate and key,
                 token, token file, basic auth, exec plugin, namespace};
                 KUBECONFIG merge rules; asb_kube_config_in_cluster.
     Kubernetes  asb_kube_client (credentials: token, token file re-read on
                 rotation, basic auth, exec plugins cached until expiry and
                 re-run after a 401); asb_kube_request and asb_kube_create /
                 _get / _delete / _patch / _list (label/field selectors,
                 pagination); asb_kube_watch (callback per complete event;
                 resourceVersion tracking, 410 restart, resume until a
                 deadline; the return value is the one final outcome).
                 Failures decode the Status body into asb_error
                 (http_status, reason, message).
     kubectl     the local tunnel (internal; no API of its own): one
                 `kubectl port-forward` per client and router namespace,
                 started with the first claim, rebuilt when it dies,
                 stopped with SIGTERM then SIGKILL, always reaped.
     connector   asb_client_desc.mode: ASB_CONNECT_LOCAL_TUNNEL (default),
                 _DIRECT (router URL), _IN_CLUSTER (pod IP, no router
                 headers), _GATEWAY (the Gateway's first valid address),
                 _NATIVE_TUNNEL (kubectl-free port-forward to the router);
                 router headers (X-Sandbox-ID/-Namespace/-Port/-Timeout, a
                 stable X-Request-ID, optional X-Sandbox-Pod-IP), a bearer
                 token and extra headers for routers that require auth.
                 An https router (direct_url, or a Gateway with
                 gateway_https) is verified with asb_client_desc.
                 sandbox_tls: the system CA bundle by default, or a
                 private CA, a client certificate, a server name, or
                 insecure; the kubeconfig's TLS is the API server's alone.
                 One example program per mode: examples/quickstart.c and
                 local_tunnel.c, direct_url.c, gateway.c, in_cluster.c.
     tracing     asb_tracer_desc in asb_client_desc.tracer: spans per call
                 under a lifecycle span per handle, W3C trace context on
                 requests and claims, callbacks and an OTLP/HTTP JSON
                 exporter on its own thread; asb_client_latency
                 (histograms); asb_traceparent_parse / _format. See
                 "TRACING".
     sandbox     asb_sandbox (handle): asb_sandbox_run (stdout, stderr,
                 exit code; binary-safe), asb_sandbox_write / _write_stream,
                 asb_sandbox_read / _read_stream / _read_to_fd,
                 asb_sandbox_write_from_fd, asb_sandbox_list,
                 asb_sandbox_exists, asb_sandbox_status, asb_sandbox_pod_ip,
                 asb_sandbox_close_connection, asb_sandbox_terminate;
                 each call that talks to the runtime also has an _opts
                 form taking asb_call_opts (deadline, cancel token).
     client      asb_client (registry of live handles keyed by namespace and
                 claim name): asb_client_create(desc),
                 asb_client_create_sandbox(template, asb_create_opts
                 {namespace, ready timeout, labels, shutdown_after_seconds,
                 warm pool, claim name, v1beta1 env and pod metadata}),
                 asb_client_get_sandbox, asb_client_list_active,
                 asb_client_list_all (names), asb_client_list_claims
                 (details, every namespace), asb_client_delete_sandbox,
                 asb_client_delete_all, asb_client_free (optional cleanup);
                 asb_client_namespace (what a NULL namespace means: the
                 context's), asb_client_kube and asb_client_claim_resource
                 for Kubernetes calls of your own.
                 Thread safety: one client may be used from several threads,
                 each driving its own sandboxes (the registry, tunnel and
                 credentials are locked); one handle from one thread at a
                 time.

   Every option struct is zero-initialised by the caller; each field's
   comment states its default; adding a field never breaks a caller.

   ===========================================================================
   JSON
   ===========================================================================

   The tokenizer has jsmn's API and token model: you give it the text and an
   array of tokens; each token has a type, [start, end) byte offsets into the
   text (strings exclude their quotes), a size (members of an object, elements
   of an array, 1 for a key that has its value) and the index of its parent.
   It is resumable: ASB_JSON_ERROR_NOMEM and ASB_JSON_ERROR_PART leave the
   parser where it can continue after you grow the token array or append
   more text. Unlike jsmn:

     - it is always strict and rejects everything RFC 8259 forbids: trailing
       commas, missing commas or colons, unquoted keys, bad literals
       (`tru`, `nul`), bad numbers (leading zeros, `1.`, `.5`, `+1`, `1e`),
       bad escapes, control characters and invalid UTF-8 in strings, more
       than one top-level value, and nesting deeper than ASB_JSON_MAX_DEPTH;
     - a top-level number is complete at the end of the text (jsmn's strict
       mode answers JSMN_ERROR_PART for `123`);
     - it is linear in every mode: parent links are always kept, so closing
       a container never walks back over the tokens.

   Lookup: asb_json_find(doc, from, "items.3.metadata.name") (also
   "items[3].metadata.name"; write `\.` for a dot inside a key, as in
   "metadata.annotations.agents\\.x-k8s\\.io/pod-name").

   ===========================================================================
   HTTP AND TLS
   ===========================================================================

   One asb_http_client per program (or per set of settings) owns a pool of
   keep-alive connections and the TLS state; asb_http_do performs one
   request with the client's timeouts and retry policy:

       // GET an API server's /version, trusting a private CA.
       #define AGENTSANDBOX_IMPLEMENTATION
       #include "agentsandbox.h"
       #include <stdio.h>
       #include <string.h>

       int main(void) {
           asb_http_client_desc d;
           asb_http_client *http;
           asb_http_request req;
           asb_http_response resp;
           asb_error err;
           int ok;
           memset(&d, 0, sizeof d);
           memset(&req, 0, sizeof req);
           d.tls.ca_file = "/etc/kubernetes/pki/ca.crt"; // default: system bundle
           if (asb_http_client_create(&d, &http, &err) != ASB_OK) {
               fprintf(stderr, "%s\n", err.message);  // e.g. the CA file is missing
               return 1;
           }
           req.url = "https://127.0.0.1:6443/version"; // method default: GET
           ok = asb_http_do(http, &req, &resp, &err) == ASB_OK;
           if (ok)
               printf("%.*s\n", (int)resp.body.len, resp.body.ptr);
           else
               fprintf(stderr, "%s (HTTP %d)\n", err.message, err.http_status);
           asb_http_response_free(&resp); // always, whatever the result
           asb_http_client_free(http);
           return ok ? 0 : 1;
       }

   What it guarantees: a redirect is an error, never followed; a 4xx/5xx is
   ASB_ERR_HTTP_STATUS with the status and the body's first bytes in err
   (the whole body, capped, in resp); a body shorter than its
   Content-Length is an error, never partial data; only idempotent methods
   are retried once they reached the server (a POST only when it provably
   did not); header values with CR/LF/NUL are refused before anything is
   sent; servers addressed by IP are verified against the certificate's
   IP-address SANs with mbedTLS 2.28 and 3.x alike, and get no SNI.
   Large bodies stream both ways (body_read / on_body) in constant memory.
   Name resolution is bounded by connect_timeout_ms (getaddrinfo runs on a
   helper thread; IP literals never ask a resolver), and with no
   /etc/resolv.conf the error says so. No TLS is set up until the first
   https:// connection; the system CA bundle honours SSL_CERT_FILE and
   SSL_CERT_DIR. No request path needs more than 32 KiB of stack
   (tests/test_static.c measures it).

   ===========================================================================
   HTTP2 AND GRPC
   ===========================================================================

   For gRPC services such as sandboxd's process.v1.ProcessService (h2c on
   the pod's port 9090): an HTTP/2 client (RFC 9113), gRPC on top, and the
   protobuf wire format by hand. No new dependency.

       // One unary call to sandboxd's ProcessService: bytes to a process's stdin.
       #define AGENTSANDBOX_IMPLEMENTATION
       #include "agentsandbox.h"
       #include <stdio.h>
       #include <string.h>

       int main(void) {
           asb_h2_desc d;
           asb_h2_conn *h2;
           asb_grpc_call_desc call;
           asb_buf req, resp;
           asb_error err;
           asb_result r;
           memset(&d, 0, sizeof d);
           memset(&call, 0, sizeof call);
           d.url = "http://127.0.0.1:9090";        // https://: TLS, ALPN h2
           if (asb_h2_connect(&d, &h2, &err) != ASB_OK) {
               fprintf(stderr, "%s\n", err.message);
               return 1;
           }
           asb_buf_init(&req, NULL);
           asb_buf_init(&resp, NULL);
           asb_pb_put_int32(&req, 1, 42);           // WriteStdinRequest.pid
           asb_pb_put_bytes(&req, 2, "ls\n", 3);    // WriteStdinRequest.data
           call.method = "/process.v1.ProcessService/WriteStdin";
           call.timeout_ms = 5000;
           r = asb_grpc_unary(h2, &call, req.ptr, req.len, &resp, &err);
           if (r != ASB_OK)                         // err.reason: e.g. NOT_FOUND
               fprintf(stderr, "%s [%s]\n", err.message, err.reason);
           asb_buf_free(&req);
           asb_buf_free(&resp);
           asb_h2_conn_free(h2);                    // after its streams
           return r == ASB_OK ? 0 : 1;
       }

   Server streaming: asb_grpc_call_start, then asb_grpc_call_run delivers
   each complete message to on_message (user_data, borrowed bytes) and ends
   with exactly one on_done; asb_grpc_call_cancel from another thread stops
   it. A Start stream stays open while unary calls run beside it from other
   threads: one I/O thread per connection owns the socket, answers PING and
   SETTINGS, and reads ahead only as far as the windows allow.

   In: prior-knowledge h2c and TLS with ALPN h2; SETTINGS both ways; PING;
   GOAWAY (no new streams, streams above its last id fail ASB_ERR_CLOSED,
   the others finish); RST_STREAM both ways; flow control on both levels
   (a reader that stops holds at most stream_window bytes; a large upload
   waits for WINDOW_UPDATE); CONTINUATION; padding; several concurrent
   streams within the server's limit; HPACK with Huffman decoding and the
   dynamic table (with size updates). gRPC: the 5-byte message framing,
   te: trailers, grpc-timeout, grpc-status and percent-decoded grpc-message
   from trailers or trailers-only responses, RST_STREAM(CANCEL) on cancel,
   deadline and errors. Caps: max_frame_size (16 KiB),
   max_header_list_bytes (64 KiB), max_message_bytes (4 MiB).

   Out, and why: server push (disabled in our SETTINGS: nothing to push to
   an RPC client); priorities (ignored, as RFC 9113 allows); HPACK
   Huffman *encoding* and indexing on send (literals cost a few bytes per
   request; never indexing leaves no encoder state to get wrong); gRPC
   compression (never offered, so a compressed message is an error);
   client-streaming calls (sandboxd has none); the HTTP/1.1 Upgrade to h2c
   (prior knowledge is what gRPC uses).

   ===========================================================================
   KUBERNETES
   ===========================================================================

       // Print a SandboxClaim's JSON, with the kubeconfig's current context.
       #define AGENTSANDBOX_IMPLEMENTATION
       #include "agentsandbox.h"
       #include <stdio.h>

       int main(int argc, char **argv) {
           static const asb_kube_resource claims = {
               "extensions.agents.x-k8s.io", "v1alpha1", "sandboxclaims"};
           const char *name = argc > 1 ? argv[1] : "my-claim";
           asb_kube_client *kube;
           asb_buf out;
           asb_error err;
           asb_result r;
           // NULL: $KUBECONFIG or ~/.kube/config; else an asb_kube_client_desc
           // with kubeconfig.path / .context, or in_cluster = 1
           if (asb_kube_client_create(NULL, &kube, &err) != ASB_OK) {
               fprintf(stderr, "%s\n", err.message); // a broken file: file:line
               return 1;
           }
           asb_buf_init(&out, NULL);
           r = asb_kube_get(kube, &claims, "default", name, &out, &err);
           if (r == ASB_OK)
               printf("%s\n", out.ptr);
           else if (r == ASB_ERR_NOT_FOUND)
               fprintf(stderr, "no claim %s (%s)\n", name, err.reason); // NotFound
           else
               fprintf(stderr, "%s\n", err.message); // e.g. RBAC: "Forbidden"
           asb_buf_free(&out);
           asb_kube_client_free(kube);
           return r == ASB_OK ? 0 : 1;
       }

   The kubeconfig is read as kubectl reads it (its test oracle is `kubectl
   config view`): the KUBECONFIG list merged with the first file winning
   each named stanza and the current-context, relative paths resolved
   against the file that names them, `*-data` decoded, files read at load.
   A broken file is an error with file:line:col. The YAML reader covers
   what kubeconfigs use (and is also checked against PyYAML), anchors,
   aliases and merge keys (`<<: *base`) included; tags, several documents
   and duplicate keys are refused clearly. Exec plugins run with an argv array (never a shell), get
   KUBERNETES_EXEC_INFO, and are killed at exec_timeout_ms; a missing
   plugin's error carries its installHint. Legacy auth-providers are
   refused with advice. Watches block in poll: an idle watch costs nothing.

   ===========================================================================
   PORT-FORWARD
   ===========================================================================

       // GET / on a Service's port through the apiserver: no kubectl.
       #define AGENTSANDBOX_IMPLEMENTATION
       #include "agentsandbox.h"
       #include <stdio.h>
       #include <string.h>
       #include <unistd.h>

       int main(void) {
           asb_kube_client *kube;
           asb_portforward_desc d;
           asb_portforward *pf;
           asb_error err;
           char buf[512];
           const char *req = "GET / HTTP/1.0\r\n\r\n";
           int fd;
           long n;
           if (asb_kube_client_create(NULL, &kube, &err) != ASB_OK) return 1;
           memset(&d, 0, sizeof d);
           d.ns = "agent-sandbox-system";
           d.service = "sandbox-router-svc"; // its selector picks a Ready pod
           d.port = "8080";                  // the Service port (or its name)
           if (asb_portforward_create(kube, &d, &pf, &err) != ASB_OK ||
               asb_portforward_dial(pf, &fd, &err) != ASB_OK) {
               fprintf(stderr, "%s\n", err.message); // RBAC: 403 and why
               return 1;
           }
           // fd is a socket (non-blocking) to the pod's port: one stream
           if (write(fd, req, strlen(req)) < 0) return 1;
           for (;;) {
               n = read(fd, buf, sizeof buf);
               if (n > 0) fwrite(buf, 1, (size_t)n, stdout);
               else if (n == 0) break;
               else usleep(10000); // EAGAIN: poll() in real code
           }
           close(fd);
           asb_portforward_free(pf);
           asb_kube_client_free(kube);
           return 0;
       }

   What kubectl port-forward does, inside the process: the Service's
   selector and port resolved to a Running, Ready pod and its target port
   (named ports too), then one WebSocket per connection to the pod's
   portforward subresource with the v4.channel.k8s.io protocol, which the
   apiserver hands to the kubelet unchanged. It needs `get` (or, on newer
   servers, `create`) on pods/portforward and get/list on services and
   pods. The SPDY protocols kubectl prefers are not spoken (zlib-framed
   headers); the kubectl tunnel remains for servers or proxies that only
   pass SPDY. asb_kube_ws_connect is the WebSocket client underneath,
   usable for other subresources.

   ===========================================================================
   RULES
   ===========================================================================

   Small, pure functions that carry the client-side rules of the
   reference (Python) SDK, so both refuse the same input: safe file paths, Kubernetes label syntax, claim names,
   TTL to shutdownTime, percent-encoding, base64 and RFC 3339 times. Each
   reports through asb_error with a message that names what was wrong.

   ===========================================================================
   TRACING: OpenTelemetry spans and latency histograms
   ===========================================================================

   Off by default and then free (no allocation, no clock read). Set
   asb_client_desc.tracer.enable = 1 and the client records, as the
   reference SDK's tracer does, one span per call named
   "<service>.<operation>" (service_name, else $OTEL_SERVICE_NAME, else
   "sandbox-client"), all children of a "<service>.lifecycle" span per
   handle (from create or attach to terminate, close or client free):

     create_claim          sandbox.claim.name, sandbox.lifecycle.
                           shutdown_time and .shutdown_policy (with a TTL)
     wait_for_claim_ready  sandbox.claim.name
     delete_claim          sandbox.claim.name
     run                   sandbox.command.executable (the program's base
                           name only: `API_KEY=x ./run.sh --arg` records
                           "run.sh"), sandbox.exit_code
     write / read          sandbox.file.path, sandbox.file.size
     list                  sandbox.file.path, sandbox.file.count
     exists                sandbox.file.path, sandbox.file.exists

   A failed call's span has status ERROR with the code's name
   (asb_result_str) and the attributes asb.error.code, error.type and,
   from HTTP, http.response.status_code; never an error message, a
   command's arguments or environment, file contents, a header or a token.

   Propagation: every request of a call to the router or runtime carries
   W3C traceparent (its span) and tracestate (tracer.parent_state); a new
   claim carries the annotation opentelemetry.io/trace-context, the
   reference's JSON {"traceparent": "00-..."} of the create_claim span.
   tracer.parent (a traceparent value) puts the lifecycle spans in your
   trace; asb_sandbox_traceparent gives a handle's, for your own spans.

   Export: tracer.on_span_end gets each span as it ends (name, ids, times,
   attributes, status) on the calling thread. The built-in OTLP/HTTP
   exporter (JSON: POST <endpoint>/v1/traces and /v1/metrics) runs when an
   endpoint is set, by the options or as every OpenTelemetry SDK reads it:
   OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT,
   OTEL_EXPORTER_OTLP_METRICS_ENDPOINT, OTEL_EXPORTER_OTLP_HEADERS,
   OTEL_SERVICE_NAME; OTEL_SDK_DISABLED=true turns tracing off. Spans are
   queued (at most max_queued_spans; more are dropped and counted) and
   sent in batches from the exporter's own thread every export_interval_ms
   (at once at 512 spans), with the histograms; asb_client_free sends the
   rest (waiting at most otlp_timeout_ms). An export never makes a call
   fail or wait: a failed one is logged (otel.export, once per run of
   failures) and its batch dropped.

   Histograms (ms; asb_client_latency reads them, the exporter sends them
   as cumulative OTLP histograms): sandbox_client_create_ready_latency_ms
   (create to Ready), sandbox_client_discovery_latency_ms {mode:
   port_forward (the tunnel's start), gateway (the Gateway's address)},
   sandbox_client_call_latency_ms {op: create_claim, wait_for_claim_ready,
   delete_claim, run, write, read, list, exists}; each with status
   success or failure, as the reference's Prometheus histograms.

   ===========================================================================
   TROUBLESHOOTING: the first errors, and what to do
   ===========================================================================

   The README's Troubleshooting section quotes each message in full (make
   test checks it against the library); here is the short form, by how the
   message starts:

     no kubeconfig: ...
         ASB_ERR_KUBECONFIG from asb_client_create: neither $KUBECONFIG nor
         ~/.kube/config exists (nor, in a pod, a service account). Export
         KUBECONFIG or set desc.kube.kubeconfig.path.
     port-forward: cannot run "kubectl": ...
         ASB_ERR_KUBECTL_MISSING: the local tunnel needs kubectl. Put it on
         PATH, set desc.kubectl_path, or use ASB_CONNECT_DIRECT, _GATEWAY
         or _IN_CLUSTER.
     port-forward to <namespace>/sandbox-router-svc exited (status 1): ...
         ASB_ERR_PORT_FORWARD: no router Service there (kubectl's error
         follows). Find it (kubectl get svc -A | grep sandbox-router) and
         set desc.router_namespace (router_service, router_port).
     sandbox claim <claim>: TemplateNotFound: ...
         ASB_ERR_TEMPLATE_NOT_FOUND: no SandboxTemplate of that name in the
         claim's namespace (asb_create_opts.namespace_name, else the
         context's: asb_client_namespace).
     create: v1beta1 claims name a warm pool, not a template: ...
         ASB_ERR_INVALID_ARGUMENT: agent-sandbox v0.5+ claims come from a
         SandboxWarmPool: pass template NULL and set opts.warm_pool.
     POST /apis/extensions.agents.x-k8s.io/...: 403 Forbidden: ...
         ASB_ERR_KUBE_API, err.reason "Forbidden": RBAC. The user needs
         create, get, list, watch, delete on sandboxclaims (without list
         each create watches its own claim), get on sandboxes,
         and for the tunnel get on services, get and list on pods, create
         on pods/portforward in the router's namespace.
     tls: the certificate of <host>:<port> is not trusted: unknown CA: ...
         ASB_ERR_TLS_VERIFY: the kubeconfig's CA did not sign the API
         server's certificate (a stale or foreign kubeconfig): get a fresh
         one. Other reasons in that place: expired, not yet valid, name
         mismatch (see the kubeconfig's tls-server-name).
*/
/* The implementation needs POSIX.1-2008 (and, on Linux, the getrandom
   system call). Feature-test macros only work before the first system
   header, so they are set here, ahead of the include guard; if your
   implementation file includes system headers before this one under a
   strict -std=c99, define _DEFAULT_SOURCE or _GNU_SOURCE yourself. */
#if defined(AGENTSANDBOX_IMPLEMENTATION) && !defined(_GNU_SOURCE) && \
    !defined(_POSIX_C_SOURCE) && !defined(_XOPEN_SOURCE) && \
    !defined(_DEFAULT_SOURCE)
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE 1
#if defined(__APPLE__) && !defined(_DARWIN_C_SOURCE)
#define _DARWIN_C_SOURCE 1 /* _POSIX_C_SOURCE alone hides SO_NOSIGPIPE */
#endif
#endif
/* 64-bit time and file offsets on 32-bit glibc too (deadlines and file
   times past 2038, files over 2 GiB); the public API carries neither
   time_t nor off_t, so other files may be built without them. glibc wants
   both or neither; musl and 64-bit targets ignore them. */
#if defined(AGENTSANDBOX_IMPLEMENTATION) && !defined(_FILE_OFFSET_BITS)
#define _FILE_OFFSET_BITS 64
#endif
#if defined(AGENTSANDBOX_IMPLEMENTATION) && !defined(_TIME_BITS) && _FILE_OFFSET_BITS == 64
#define _TIME_BITS 64
#endif

#ifndef AGENTSANDBOX_H
#define AGENTSANDBOX_H

#define ASB_VERSION_MAJOR 0
#define ASB_VERSION_MINOR 1
#define ASB_VERSION_PATCH 0
#define ASB_VERSION_STRING "0.1.0"

#ifndef ASB_TLS
#define ASB_TLS 1
#endif
#ifndef ASB_TRACING
#define ASB_TRACING 1
#endif

#include <stddef.h>
#include <stdint.h>

#ifdef ASB_STATIC
#if defined(__GNUC__) || defined(__clang__)
#define ASB_API static __attribute__((unused))
#else
#define ASB_API static
#endif
#else
#define ASB_API extern
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ==========================================================================
   Results and errors
   ========================================================================== */

/* 0 is success; negative codes are grouped by layer, a hundred apart, so a
   code's layer is code / 100. Codes are stable across releases. */
typedef enum asb_result {
    ASB_OK = 0,

    /* general */
    ASB_ERR_INVALID_ARGUMENT = -1,  /* a caller's value breaks a rule */
    ASB_ERR_OUT_OF_MEMORY = -2,
    ASB_ERR_TOO_LARGE = -3,         /* an output or input exceeds its cap */
    ASB_ERR_TIMEOUT = -4,
    ASB_ERR_CANCELLED = -5,
    ASB_ERR_IO = -6,                /* a local file or OS call failed */
    ASB_ERR_CLOSED = -7,            /* the handle was closed or terminated */

    /* network */
    ASB_ERR_DNS = -100,
    ASB_ERR_CONNECT = -101,
    ASB_ERR_SEND = -102,
    ASB_ERR_RECV = -103,
    ASB_ERR_PROXY = -104,

    /* TLS */
    ASB_ERR_TLS_UNAVAILABLE = -200, /* built with ASB_TLS 0 */
    ASB_ERR_TLS_CONFIG = -201,      /* bad CA, certificate or key */
    ASB_ERR_TLS_HANDSHAKE = -202,
    ASB_ERR_TLS_VERIFY = -203,      /* the server's certificate is refused */

    /* HTTP */
    ASB_ERR_HTTP_PROTOCOL = -300,   /* malformed response */
    ASB_ERR_HTTP_STATUS = -301,     /* a request error: see http_status */
    ASB_ERR_HTTP_REDIRECT = -302,   /* a 3xx; redirects are never followed */
    ASB_ERR_HTTP_SHORT_BODY = -303, /* fewer bytes than Content-Length */

    /* JSON */
    ASB_ERR_JSON_INVALID = -400,    /* not RFC 8259 JSON */
    ASB_ERR_JSON_TYPE = -401,       /* a value is not of the asked type */
    ASB_ERR_JSON_RANGE = -402,      /* a number does not fit */
    ASB_ERR_JSON_NOT_FOUND = -403,  /* a path or member is absent */

    /* kubeconfig and credentials */
    ASB_ERR_KUBECONFIG = -500,
    ASB_ERR_CREDENTIALS = -501,

    /* Kubernetes */
    ASB_ERR_NOT_FOUND = -600,       /* claim, sandbox or object missing */
    ASB_ERR_KUBE_API = -601,        /* apiserver Status: see reason */

    /* kubectl and the local tunnel */
    ASB_ERR_PORT_FORWARD = -700,
    ASB_ERR_KUBECTL_MISSING = -701,
    ASB_ERR_WEBSOCKET = -702,       /* a WebSocket peer broke RFC 6455 or
                                       answered the upgrade without one */

    /* sandbox SDK */
    ASB_ERR_TEMPLATE_NOT_FOUND = -800,
    ASB_ERR_WARMPOOL_NOT_FOUND = -801,
    ASB_ERR_CLAIM_FAILED = -802,    /* a terminal Ready=False reason */
    ASB_ERR_METADATA = -803,        /* claim deleted while resolving */
    ASB_ERR_PERMISSION_DENIED = -804, /* the runtime refused a path or cwd
                                       (outside the sandbox root, or not
                                       allowed): err->reason has its code */
    ASB_ERR_CONFLICT = -805,        /* e.g. deleting a non-empty directory
                                       without recursive */
    ASB_ERR_UNSUPPORTED = -806,     /* the sandbox's runtime has no such
                                       call (e.g. a streaming process on the
                                       legacy runtime) */

    /* gRPC and protobuf */
    ASB_ERR_GRPC_STATUS = -900,     /* a non-OK grpc-status: see reason */
    ASB_ERR_PROTOBUF_INVALID = -901 /* malformed protobuf bytes */
} asb_result;

/* The stable name of a code, e.g. "ASB_ERR_TIMEOUT"; "ASB_ERR_UNKNOWN" for
   a value that is not a code. Never NULL; static storage. */
ASB_API const char *asb_result_str(asb_result code);

#define ASB_ERROR_MESSAGE_SIZE 512
#define ASB_ERROR_REASON_SIZE 64
#define ASB_ERROR_BODY_SIZE 512

/* The detail of a failure, filled by calls that take an `asb_error *`
   (which may always be NULL). Plain data, no allocation: copy it freely.
   On success the callee leaves it untouched. */
#define ASB_ERROR_HEADER_SIZE 128

typedef struct asb_error {
    asb_result code;
    int http_status;                       /* 0: no HTTP response involved */
    char reason[ASB_ERROR_REASON_SIZE];    /* e.g. Kubernetes "NotFound" */
    char message[ASB_ERROR_MESSAGE_SIZE];  /* readable; never a secret */
    char body[ASB_ERROR_BODY_SIZE];        /* first bytes of a bad body */
    size_t body_len;
    /* Headers of the failed answer worth keeping beside its body, as
       received ("" when absent; longer values cut to fit, control bytes
       as '?'). Set wherever http_status is. */
    char retry_after[ASB_ERROR_HEADER_SIZE];  /* when to come back: seconds
                                                 or an HTTP date */
    char request_id[ASB_ERROR_HEADER_SIZE];   /* X-Request-ID: the answer's,
                                                 else, for sandbox calls,
                                                 the one the request sent */
    char content_type[ASB_ERROR_HEADER_SIZE]; /* how to read `body` */
} asb_error;

/* ==========================================================================
   Logging
   ========================================================================== */

typedef enum asb_log_level {
    ASB_LOG_DEBUG = 0, /* every call: what, how many bytes, how long */
    ASB_LOG_INFO,      /* lifecycle: a sandbox created or deleted, a tunnel up */
    ASB_LOG_WARN,      /* recovered trouble: a retry, a reconnect, a rejected
                          Gateway address, a dead kubectl */
    ASB_LOG_ERROR      /* a call failed; the same text as its asb_error */
} asb_log_level;

/* One line for a human, and a stable id ("sandbox.run", "http.retry", ...:
   the list is in CONVENTIONS) for a program to filter on. Both strings live
   only during the callback. A record never holds a token, a header value,
   file contents or a command's arguments: a command is logged by its
   executable's base name only (`API_KEY=x /usr/bin/python3 -c ...` is
   "python3"). */
typedef struct asb_log_record {
    asb_log_level level;
    const char *id;
    const char *message;
} asb_log_record;

/* Called on the thread that does the work, possibly from several threads
   at once when one client is shared: make it thread-safe. Some records
   are sent while the client holds a lock: never call into the library
   from the callback, nor wait there for a thread that does. */
typedef void (*asb_log_fn)(void *user_data, const asb_log_record *rec);

/* In a description struct: zero (fn NULL) logs nothing, the default. */
typedef struct asb_logger {
    asb_log_fn fn;
    void *user_data;
    asb_log_level min_level; /* default ASB_LOG_DEBUG: everything */
} asb_logger;

/* ==========================================================================
   Memory
   ========================================================================== */

/* Either all three functions or none (NULL allocator, or all-NULL fields:
   libc). realloc_fn(NULL, n) must behave like alloc_fn(n); free_fn(NULL)
   must be harmless. */
typedef struct asb_allocator {
    void *(*alloc_fn)(size_t size, void *user_data);
    void *(*realloc_fn)(void *ptr, size_t size, void *user_data);
    void (*free_fn)(void *ptr, void *user_data);
    void *user_data;
} asb_allocator;

/* A borrowed view of bytes: not NUL-terminated unless said so. */
typedef struct asb_str {
    const char *ptr;
    size_t len;
} asb_str;

/* A growable byte buffer. `ptr` is always NUL-terminated after a successful
   append (the NUL is not counted in `len`), so text can be used as a C
   string. Owns its memory: release with asb_buf_free. */
typedef struct asb_buf {
    char *ptr;
    size_t len;
    size_t cap;
    asb_allocator alloc; /* copied from the one given to asb_buf_init */
    int wipe;            /* default 0; set 1 after asb_buf_init for a secret:
                            growth and asb_buf_free overwrite the old block
                            before freeing it (growth then never uses
                            realloc_fn, which could leave a moved copy) */
} asb_buf;

/* Makes an empty buffer (allocates nothing yet) that allocates through
   `alloc` (NULL: libc; the struct is copied). A zeroed asb_buf works too,
   with libc.
   Errors: ASB_ERR_INVALID_ARGUMENT for a half-filled allocator.
   Ownership: release with asb_buf_free once anything was appended. */
ASB_API asb_result asb_buf_init(asb_buf *buf, const asb_allocator *alloc);
/* Appends data[0, len) (binary-safe) and keeps ptr NUL-terminated; on
   failure the buffer is unchanged.
   Errors: ASB_ERR_OUT_OF_MEMORY. */
ASB_API asb_result asb_buf_append(asb_buf *buf, const void *data, size_t len);
/* Makes room for `extra` more bytes (plus the NUL) without changing len,
   so ptr is non-NULL afterwards even for extra 0.
   Errors: ASB_ERR_OUT_OF_MEMORY. */
ASB_API asb_result asb_buf_reserve(asb_buf *buf, size_t extra);
/* Frees the memory and leaves an empty buffer that may be reused.
   Harmless on an empty or already freed buffer. */
ASB_API void asb_buf_free(asb_buf *buf);

/* ==========================================================================
   JSON: tokenizer (jsmn's API and token model, always strict)
   ========================================================================== */

typedef enum asb_json_type {
    ASB_JSON_UNDEFINED = 0,
    ASB_JSON_OBJECT = 1,
    ASB_JSON_ARRAY = 2,
    ASB_JSON_STRING = 3,
    ASB_JSON_PRIMITIVE = 4 /* number, true, false or null */
} asb_json_type;

/* Returned by asb_json_parse; the same values as jsmn's. */
enum asb_json_err {
    ASB_JSON_ERROR_NOMEM = -1, /* not enough tokens: grow and call again */
    ASB_JSON_ERROR_INVAL = -2, /* not valid JSON (RFC 8259) */
    ASB_JSON_ERROR_PART = -3   /* valid so far; more text expected */
};

typedef struct asb_json_tok {
    asb_json_type type;
    int start;  /* byte offset of the first byte (after a string's quote) */
    int end;    /* byte offset one past the last (at a string's quote) */
    int size;   /* object: members; array: elements; key: 1; else 0 */
    int parent; /* index of the enclosing token (a key for a member's
                   value), -1 for the top-level value */
} asb_json_tok;

/* Deepest nesting the tokenizer accepts (deeper input is
   ASB_JSON_ERROR_INVAL). Part of the parser's layout: set it the same
   everywhere, or not at all. */
#ifndef ASB_JSON_MAX_DEPTH
#define ASB_JSON_MAX_DEPTH 1024
#endif

/* Parser state; initialise with asb_json_init. Plain data: no cleanup.
   The fields are internal; they are visible so it can live on the stack. */
typedef struct asb_json_parser {
    unsigned int pos;     /* next byte to read */
    unsigned int toknext; /* next token to allocate */
    int toksuper;         /* parent of the next token: container or key */
    int depth;            /* open containers */
    int state;            /* what may come next (internal) */
    unsigned char kinds[(ASB_JSON_MAX_DEPTH + 7) / 8]; /* 1 bit per level:
                             object or array, so the tokenizer is the same
                             whether or not it is given tokens */
} asb_json_parser;

/* Resets a parser to the start of a text (jsmn_init). Cannot fail. */
ASB_API void asb_json_init(asb_json_parser *parser);

/* Tokenizes js[0, len) into tokens[0, num_tokens). Returns the total number
   of tokens (across resumed calls), or a negative asb_json_err. With
   tokens == NULL it only validates and counts. The text must be the same
   prefix-extended buffer on every resumed call. len is limited to INT_MAX.
   Errors (jsmn's convention, not asb_result): ASB_JSON_ERROR_NOMEM (give
   more tokens and call again), ASB_JSON_ERROR_PART (append text and call
   again), ASB_JSON_ERROR_INVAL (not JSON; final).
   Ownership: nothing allocated; tokens point into js by offset. */
ASB_API int asb_json_parse(asb_json_parser *parser, const char *js, size_t len,
                           asb_json_tok *tokens, unsigned int num_tokens);

/* ==========================================================================
   JSON: documents, lookup and typed getters
   ========================================================================== */

/* A parsed document: the text (borrowed: it must outlive the doc) and the
   tokens (owned). */
typedef struct asb_json_doc {
    const char *js;
    size_t len;
    asb_json_tok *toks;
    int count;
    asb_allocator alloc;
} asb_json_doc;

/* Tokenizes a whole document, growing the token array as needed (through
   `alloc`; NULL: libc).
   Errors: ASB_ERR_JSON_INVALID (err->message says line and column),
   ASB_ERR_TOO_LARGE (more than ASB_JSON_MAX_DOC_TOKENS tokens, or len
   over INT_MAX).
   Ownership: js is borrowed and must outlive the doc; on success free the
   doc with asb_json_doc_free; on failure it needs no free (freeing it
   anyway is harmless).
   Threads: once parsed, any number of threads may read the doc. */
ASB_API asb_result asb_json_doc_parse(asb_json_doc *doc, const char *js,
                                      size_t len, const asb_allocator *alloc,
                                      asb_error *err);
/* Frees the tokens (not the text, which is the caller's). Harmless twice. */
ASB_API void asb_json_doc_free(asb_json_doc *doc);

/* Index of the token after the whole value at `tok` (its next sibling),
   or doc->count. Lookups like this one never fail loudly: a bad index
   gives -1 or doc->count, so they chain without checks. */
ASB_API int asb_json_skip(const asb_json_doc *doc, int tok);

/* The value of member `key` (key_len bytes, compared after unescaping) of
   the object at `obj`, or -1 (absent, or `obj` is not an object). */
ASB_API int asb_json_member(const asb_json_doc *doc, int obj, const char *key,
                            size_t key_len);

/* The value at a dotted path below token `from` (0: the document), or -1.
   Segments are member names; in an array a segment must be a decimal index.
   `a.0.b` and `a[0].b` are the same path; `\.` is a literal dot and `\\` a
   literal backslash inside a name. An empty path is `from` itself. */
ASB_API int asb_json_find(const asb_json_doc *doc, int from, const char *path);

/* Iteration over an array's elements or an object's members:

       asb_json_iter it = asb_json_iter_begin(&doc, arr);
       int key, val;
       while (asb_json_iter_next(&doc, &it, &key, &val)) ...

   For arrays *key is -1. Iterating a non-container yields nothing. */
typedef struct asb_json_iter {
    int next;
    int remaining;
    int is_object;
} asb_json_iter;
/* An iterator over the container at `tok` (plain data, nothing to free);
   a bad index or a scalar gives an iterator that yields nothing. */
ASB_API asb_json_iter asb_json_iter_begin(const asb_json_doc *doc, int tok);
/* 1 and the next member's key and value tokens (an array element: key
   -1), or 0 at the end. key and value may be NULL. */
ASB_API int asb_json_iter_next(const asb_json_doc *doc, asb_json_iter *it,
                               int *key, int *value);

/* Typed getters. Each returns ASB_ERR_JSON_TYPE when the token is not of the
   asked type (a bad index is ASB_ERR_INVALID_ARGUMENT).

   asb_json_get_string unescapes (\uXXXX and surrogate pairs become UTF-8)
   into out[0, cap): the result is always NUL-terminated when cap > 0, and
   *out_len (if not NULL) receives the decoded length, which may contain NUL
   bytes from \u0000. When cap is too small: ASB_ERR_TOO_LARGE, *out_len
   is the length needed (without the terminator). An unpaired surrogate is
   ASB_ERR_JSON_INVALID. */
ASB_API asb_result asb_json_get_string(const asb_json_doc *doc, int tok,
                                       char *out, size_t cap, size_t *out_len);
/* The same, appended to a buffer (all or nothing: on failure `out` is as
   it was).
   Errors: ASB_ERR_JSON_TYPE, ASB_ERR_JSON_INVALID, ASB_ERR_OUT_OF_MEMORY.
   Ownership: out is the caller's (asb_buf_free). */
ASB_API asb_result asb_json_append_string(const asb_json_doc *doc, int tok,
                                          asb_buf *out);
/* True when the token is a string equal to s[0, len) after unescaping;
   0 for anything else, a bad index included. */
ASB_API int asb_json_string_eq(const asb_json_doc *doc, int tok,
                               const char *s, size_t len);
/* Integers only (no fraction or exponent).
   Errors: ASB_ERR_JSON_TYPE (not an integer), ASB_ERR_JSON_RANGE (does
   not fit in int64_t). */
ASB_API asb_result asb_json_get_int64(const asb_json_doc *doc, int tok,
                                      int64_t *out);
/* Any number, independent of the C locale.
   Errors: ASB_ERR_JSON_TYPE (not a number), ASB_ERR_JSON_RANGE (overflows
   a double). */
ASB_API asb_result asb_json_get_double(const asb_json_doc *doc, int tok,
                                       double *out);
/* true or false into *out as 1 or 0.
   Errors: ASB_ERR_JSON_TYPE for anything else. */
ASB_API asb_result asb_json_get_bool(const asb_json_doc *doc, int tok,
                                     int *out);
/* True when the token is the literal null; 0 otherwise (a bad index too). */
ASB_API int asb_json_is_null(const asb_json_doc *doc, int tok);

/* ==========================================================================
   JSON: writer
   ========================================================================== */

/* Builds JSON text into an asb_buf. Errors are sticky: after the first
   failure every call is a no-op and asb_json_writer_finish reports it, so
   building code need not check every call. Misuse (a value where a key is
   due, an unbalanced end) is ASB_ERR_INVALID_ARGUMENT. Strings are escaped
   as RFC 8259 requires; control characters become \u00XX (or \n, \t, ...).
   Invalid UTF-8 in a string is ASB_ERR_INVALID_ARGUMENT unless
   `replace_invalid_utf8` is set, in which case each bad byte becomes
   U+FFFD. NaN and infinities are ASB_ERR_INVALID_ARGUMENT. */
typedef struct asb_json_writer {
    asb_buf *out;              /* appended to; owned by the caller */
    int replace_invalid_utf8;  /* default 0: invalid UTF-8 is an error */
    asb_result err;            /* first error, sticky */
    int depth;
    unsigned char stack[64];   /* per level: 'o'/'a' | need comma | key */
} asb_json_writer;

/* Starts a writer that appends to `out` (borrowed: it must outlive the
   writer; the caller frees it). replace_invalid_utf8 may be set after.
   Ownership: the writer itself holds no memory. */
ASB_API void asb_json_writer_init(asb_json_writer *w, asb_buf *out);
/* The building calls: containers, keys (NUL-terminated, or _n with a
   length), values. None returns a result: a misuse or a failed append
   is kept in w->err (sticky, see above) for asb_json_writer_finish. At
   most 63 levels of nesting (deeper is ASB_ERR_TOO_LARGE). */
ASB_API void asb_json_object_begin(asb_json_writer *w);
ASB_API void asb_json_object_end(asb_json_writer *w);
ASB_API void asb_json_array_begin(asb_json_writer *w);
ASB_API void asb_json_array_end(asb_json_writer *w);
ASB_API void asb_json_key(asb_json_writer *w, const char *key);
ASB_API void asb_json_key_n(asb_json_writer *w, const char *key, size_t len);
ASB_API void asb_json_string(asb_json_writer *w, const char *s);
ASB_API void asb_json_string_n(asb_json_writer *w, const char *s, size_t len);
ASB_API void asb_json_int64(asb_json_writer *w, int64_t v);
ASB_API void asb_json_double(asb_json_writer *w, double v);
ASB_API void asb_json_bool(asb_json_writer *w, int v);
ASB_API void asb_json_null(asb_json_writer *w);
/* ASB_OK when the document is complete and nothing failed.
   Errors: the first one (w->err), or ASB_ERR_INVALID_ARGUMENT when a
   container is still open or nothing was written. */
ASB_API asb_result asb_json_writer_finish(asb_json_writer *w);

/* ==========================================================================
   RULES: the SDK's small client-side rules
   ========================================================================== */

/* Safe upload/download path (the reference SDK's rule): rejects any byte
   < 0x20 or 0x7F (checked before anything else, so a NUL cannot hide a
   `..`), trims surrounding whitespace, rejects an empty path, normalises
   POSIX-style (collapses `//` and `.`, resolves `..` lexically, drops a trailing `/`
   as posixpath.normpath does: "dir/" is "dir"), strips the leading `/` and
   rejects a result that is `.`, empty or still climbs out with `..`. The
   result goes into out[0, cap), NUL-terminated; *out_len (may be NULL)
   gets its length.
   Errors: ASB_ERR_INVALID_ARGUMENT (the message names the rule broken),
   ASB_ERR_TOO_LARGE (cap too small). */
ASB_API asb_result asb_path_normalize(const char *path, size_t len, char *out,
                                      size_t cap, size_t *out_len,
                                      asb_error *err);

/* Kubernetes label key (`[prefix/]name`) and value syntax.
   Errors: ASB_ERR_INVALID_ARGUMENT; the message names the bad key or
   value and the rule it breaks. */
ASB_API asb_result asb_label_validate_key(const char *key, size_t len,
                                          asb_error *err);
ASB_API asb_result asb_label_validate_value(const char *value, size_t len,
                                            asb_error *err);

typedef struct asb_label {
    const char *key;   /* NUL-terminated */
    const char *value; /* NUL-terminated; "" is a valid value */
} asb_label;
/* Every key and value; the first bad one is reported.
   Errors: ASB_ERR_INVALID_ARGUMENT, as for one label. */
ASB_API asb_result asb_labels_validate(const asb_label *labels, size_t count,
                                       asb_error *err);

/* A DNS-1123 label (`[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 bytes):
   what namespaces and sandbox names must be before they go into headers.
   Errors: ASB_ERR_INVALID_ARGUMENT, naming the name and the rule. */
ASB_API asb_result asb_dns_label_validate(const char *name, size_t len,
                                          asb_error *err);

/* A Gateway's status address as the SDK may use it: an IPv4 address in
   dotted-quad form, an IPv6 address, or a DNS hostname (labels of 1-63
   letters, digits and inner '-', at most 253 bytes, not all-numeric).
   Everything else is refused: paths, queries, user info, ports, '_',
   trailing dots, and the numeric forms libc would read as an address
   (2130706433, 0x7f.0.0.1).
   Errors: ASB_ERR_INVALID_ARGUMENT, naming the address and what is
   wrong with it. */
ASB_API asb_result asb_gateway_address_validate(const char *addr, size_t len,
                                                asb_error *err);

/* A claim name the caller chose: a DNS-1123 subdomain (lowercase
   letters, digits, '-' and '.', each dot-separated part starting and
   ending with a letter or digit), at most 253 bytes.
   Errors: ASB_ERR_INVALID_ARGUMENT, naming the name and the rule. */
ASB_API asb_result asb_claim_name_validate(const char *name, size_t len,
                                           asb_error *err);

/* An environment variable name as Kubernetes takes it for a claim's
   spec.env: `[-._a-zA-Z][-._a-zA-Z0-9]*`, and not ".", ".." or anything
   starting with "..".
   Errors: ASB_ERR_INVALID_ARGUMENT, naming the name and the rule. */
ASB_API asb_result asb_env_name_validate(const char *name, size_t len,
                                         asb_error *err);

/* "sandbox-claim-" + 8 lowercase hex digits from the OS random source
   (getrandom, else /dev/urandom; never rand()), NUL-terminated in out.
   Errors: ASB_ERR_IO when the OS has no randomness to give. */
#define ASB_CLAIM_NAME_SIZE 23 /* 22 characters + NUL */
ASB_API asb_result asb_claim_name_generate(char out[ASB_CLAIM_NAME_SIZE],
                                           asb_error *err);

/* "YYYY-MM-DDTHH:MM:SSZ" (UTC) */
#define ASB_TIME_SIZE 21 /* 20 characters + NUL */

/* spec.lifecycle.shutdownTime for a TTL: now + ttl_seconds, formatted.
   `now` is seconds since the Unix epoch (pass time(NULL)).
   Errors: ASB_ERR_INVALID_ARGUMENT for a TTL that is not positive or a
   sum past year 9999. */
ASB_API asb_result asb_shutdown_time_from_ttl(int64_t now, int64_t ttl_seconds,
                                              char out[ASB_TIME_SIZE],
                                              asb_error *err);

/* Formats seconds since the epoch as "YYYY-MM-DDTHH:MM:SSZ".
   Errors: ASB_ERR_INVALID_ARGUMENT outside the years 0000-9999. */
ASB_API asb_result asb_time_format_rfc3339(int64_t t, char out[ASB_TIME_SIZE]);

/* Parses an RFC 3339 date-time (`T`/`t`/space, fractional seconds, `Z` or
   a numeric offset) into seconds since the epoch (fraction truncated).
   Errors: ASB_ERR_INVALID_ARGUMENT, quoting the text and what is wrong. */
ASB_API asb_result asb_time_parse_rfc3339(const char *s, size_t len,
                                          int64_t *out, asb_error *err);

/* Appends s[0, len) percent-encoded as one URL path segment: every byte
   outside A-Z a-z 0-9 - _ . ~ becomes %XX (so `/` is %2F), and a segment
   that is exactly `.` or `..` is written %2E / %2E%2E so no server or proxy
   treats it as a dot-segment.
   Errors: ASB_ERR_OUT_OF_MEMORY (out may then hold part of the segment).
   Ownership: out is the caller's (asb_buf_free). */
ASB_API asb_result asb_percent_encode_segment(const char *s, size_t len,
                                              asb_buf *out);

/* Standard base64 (RFC 4648, with padding). Decoding skips CR and LF (as
   Go's decoder does, so PEM-wrapped kubeconfig data loads) and rejects
   anything else outside the alphabet, bad padding and non-zero trailing
   bits. Both append to `out`.
   Errors: decoding, ASB_ERR_INVALID_ARGUMENT naming the offset of the
   first bad byte.
   Ownership: out is the caller's (asb_buf_free). */
ASB_API asb_result asb_base64_encode(const void *data, size_t len,
                                     asb_buf *out);
ASB_API asb_result asb_base64_decode(const char *s, size_t len, asb_buf *out,
                                     asb_error *err);

/* ==========================================================================
   YAML (the subset kubeconfig files use)
   ========================================================================== */

/* A YAML node. Maps keep their keys and values as alternating children
   (key, value, key, value ...); sequences their items. Scalars keep the
   decoded text (NUL-terminated; binary-safe with len). `plain` tells an
   unquoted scalar (which may mean null or a boolean) from a quoted or
   block one (always a string). */
typedef enum asb_yaml_type {
    ASB_YAML_NULL = 0, /* an empty value, `~` or `null` */
    ASB_YAML_SCALAR,
    ASB_YAML_MAP,
    ASB_YAML_SEQ
} asb_yaml_type;

typedef struct asb_yaml_node {
    asb_yaml_type type;
    int line, col;               /* where it starts, 1-based */
    const char *str;             /* scalar text ("" for others) */
    size_t len;
    int plain;                   /* an unquoted scalar */
    int count;                   /* children: 2 per map entry, 1 per item */
    struct asb_yaml_node *first; /* first child */
    struct asb_yaml_node *next;  /* next sibling */
} asb_yaml_node;

/* A parsed document; owns every node and string. */
typedef struct asb_yaml_doc {
    asb_yaml_node *root;
    void *arena_; /* internal */
    asb_allocator alloc_;
} asb_yaml_doc;

/* Parses one YAML document: block maps and sequences (items holding maps,
   sequences not indented under their key), plain, single- and
   double-quoted scalars (with escapes and line folding), literal and
   folded block scalars with chomping and indentation indicators, flow
   maps and sequences (so a JSON file loads), comments and `---`.
   Anchors (`&name`) and aliases (`*name`) before a value (after "key:",
   after "- ", in a flow collection), and merge keys (`<<: *a` or
   `<<: [*a, *b]`: an earlier map wins, keys written after the `<<` win)
   as kubectl reads them. An alias node is a copy of its anchor's node
   sharing the children (never modified), so aliases cost no memory;
   the nodes they stand for together are capped at
   ASB_YAML_MAX_ALIAS_NODES and their depth at ASB_YAML_MAX_DEPTH.
   Anything else (tags, anchors elsewhere, "- &a key: v" (the anchor
   would name the key), a key written before a `<<` that sets it too
   (go-yaml and the YAML spec disagree there), several documents,
   duplicate keys, tabs in indentation, bad indentation) is
   ASB_ERR_KUBECONFIG with "<name>:<line>:<col>: <what>" in
   err->message, never a guessed value.
   `name` labels messages (a file name; NULL: "<yaml>"). `alloc` NULL:
   libc.
   Errors: ASB_ERR_KUBECONFIG (the text is not YAML this reader takes).
   Ownership: every node and string is the doc's (text is not kept): free
   with asb_yaml_free on success; after a failure there is nothing to
   free. */
ASB_API asb_result asb_yaml_parse(asb_yaml_doc *doc, const char *text, size_t len,
                                  const char *name, const asb_allocator *alloc,
                                  asb_error *err);
/* Frees every node and string of the doc. Harmless twice. */
ASB_API void asb_yaml_free(asb_yaml_doc *doc);

/* The value of `key` in a map node, or NULL (absent, or not a map).
   Borrowed: lives as long as the doc. */
ASB_API const asb_yaml_node *asb_yaml_get(const asb_yaml_node *map, const char *key);
/* True for a null node or a missing one (NULL). */
ASB_API int asb_yaml_is_null(const asb_yaml_node *node);
/* A boolean: plain true/false (any case, as YAML 1.2's core schema, plus
   yes/no/on/off as YAML 1.1 and Go's yaml.v2 read them); quoted text is
   not a boolean. ASB_ERR_INVALID_ARGUMENT otherwise. */
ASB_API asb_result asb_yaml_bool(const asb_yaml_node *node, int *out);

/* ==========================================================================
   HTTP/1.1 client with TLS (mbedTLS)
   ========================================================================== */

/* A parsed http(s) URL. Views borrow the parsed string: they live as long
   as it does. */
typedef struct asb_url {
    asb_str scheme; /* "http" or "https", as written */
    asb_str host;   /* without the brackets of an IPv6 literal */
    int port;       /* explicit, else 80 / 443 */
    asb_str target; /* path and query ("" means "/"); the fragment dropped */
    int is_https;
    int host_is_ip; /* 4 or 6 for an IP literal, else 0 */
} asb_url;

/* Parses `http://host[:port][/path][?query][#fragment]` (also https, IPv6
   literals in brackets). Rejects other schemes, user info (`user@host`),
   empty hosts, bad ports and bytes that cannot appear in a request line.
   Errors: ASB_ERR_INVALID_ARGUMENT, quoting the URL's problem part.
   Ownership: out's views borrow `url`, which must outlive them. */
ASB_API asb_result asb_url_parse(const char *url, size_t len, asb_url *out,
                                 asb_error *err);

/* How https connections are verified and authenticated. Zero-initialised
   means: verify the server against the system CA bundle, no client
   certificate. Data fields are PEM or DER bytes in memory (kubeconfig's
   base64-decoded `*-data`); the library copies what it keeps. */
typedef struct asb_tls_config {
    const char *ca_file;          /* PEM bundle; default: the system bundle */
    const char *ca_dir;           /* a hashed directory of CA certificates */
    const void *ca_data;          /* PEM or DER in memory */
    size_t ca_data_len;
    const char *client_cert_file; /* PEM; with the key: mutual TLS */
    const void *client_cert_data;
    size_t client_cert_data_len;
    const char *client_key_file;  /* PEM, RSA or EC */
    const void *client_key_data;
    size_t client_key_data_len;
    const char *server_name;      /* SNI and verification name instead of
                                     the URL's host (tls-server-name) */
    int insecure_skip_verify;     /* default 0. 1: no verification at all */
} asb_tls_config;

/* A cancel token: C's stand-in for Go's context.Context cancellation and
   Python's task.cancel(). Give it to calls (asb_http_request.cancel,
   asb_call_opts.cancel); asb_cancel_trigger from any thread, or from a
   signal handler, makes every blocking call holding it return
   ASB_ERR_CANCELLED promptly: the token is a pipe polled beside the
   socket, so a wait ends at once (measured 0.2-0.4 ms in test_sdk.c's
   cancel_from_another_thread_ends_a_waiting_call_at_once, about 1 ms
   through kubectl and the router in test_sdk_cluster.c). The call closes
   its connection (never returned to the pool: the answer in flight would
   desynchronise it), frees what it allocated, and the handle stays usable.
   A token stays triggered, failing every call given it, until
   asb_cancel_reset. One token may serve many calls and threads at once.

       asb_cancel *tok;
       asb_call_opts o = {0};
       asb_cancel_create(NULL, &tok, &err);
       o.cancel = tok;             // another thread: asb_cancel_trigger(tok)
       r = asb_sandbox_run_opts(sb, "make test", &o, &res, &err);
       if (r == ASB_ERR_CANCELLED) ...  // the command may still run there
       asb_cancel_free(tok);       // once no call uses it
   */
typedef struct asb_cancel asb_cancel;
/* Makes an untriggered token (NULL alloc: libc).
   Errors: ASB_ERR_IO (no file descriptors left for its pipe).
   Ownership: free with asb_cancel_free once no call holds it. */
ASB_API asb_result asb_cancel_create(const asb_allocator *alloc, asb_cancel **out,
                                     asb_error *err);
/* Thread-safe and async-signal-safe (one write(2)); idempotent. */
ASB_API void asb_cancel_trigger(asb_cancel *token);
/* 1 once triggered (until reset), else 0. Thread-safe. */
ASB_API int asb_cancel_is_triggered(const asb_cancel *token);
/* Re-arms the token. Call it when no call holds the token, or a call
   running meanwhile may miss the cancel. */
ASB_API void asb_cancel_reset(asb_cancel *token);
/* Frees it; no call may still hold it. NULL is fine. */
ASB_API void asb_cancel_free(asb_cancel *token);

/* When a failed request is tried again. Zero-initialised means the
   defaults below. Retried: connection failures, and the statuses 429,
   500, 502, 503 and 504. Only idempotent requests (GET, HEAD, PUT,
   DELETE, OPTIONS) are retried after they reached the server; any request
   is retried when it provably never did (DNS failure, connection refused).
   A streamed response that already delivered bytes is never retried.
   A Retry-After on a retried answer (seconds or an HTTP date) sets the
   wait when it is longer than the backoff's.
   Pooled connections: one the server closed is replaced (a request that
   provably did not reach it is sent again, whatever its method); one idle
   past max_idle_ms is not reused; and an idempotent request that gets no
   byte within the read timeout on a pooled connection is sent once more on
   a new one (a tunnel such as kwok's port-forward can hide the server's
   close, so the request was swallowed). A POST is never sent twice that
   way: it may be running (a command in a sandbox), so it waits for its
   deadline and fails with ASB_ERR_TIMEOUT. */
typedef struct asb_retry_policy {
    int max_attempts;   /* default 5 (1 turns retries off) */
    int backoff_ms;     /* default 500: waits 0.5, 1, 2, 4 s ... */
    int max_backoff_ms; /* default 8000 */
    int no_jitter;      /* default 0: each wait is drawn from [w/2, w] */
    int max_retry_after_ms; /* default 60000: a server asking for a longer
                               wait gets no retry; its answer is the error */
    int retry_429_any_method; /* default 0. 1: a 429 proves the request was
                               turned away unprocessed, so a POST is retried
                               too (true of a Kubernetes API server, whose
                               429s come from its admission of requests
                               before any handler; asb_kube_client sets it) */
} asb_retry_policy;

typedef struct asb_http_client_desc {
    const asb_allocator *allocator; /* default NULL: libc */
    asb_tls_config tls;             /* for https URLs */
    int connect_timeout_ms;         /* default 10000 (resolving included) */
    int read_timeout_ms;            /* default 30000: longest wait for the
                                       next byte from the server */
    size_t max_body_bytes;          /* default 16 MiB: cap on buffered
                                       bodies (streamed ones have none) */
    size_t max_header_bytes;        /* default 64 KiB: whole header block */
    int max_headers;                /* default 128 header lines */
    int max_idle_connections;       /* default 8 kept for reuse (at most
                                       256); -1: none */
    int max_idle_ms;                /* default 30000: a pooled connection
                                       idle longer is closed, not reused.
                                       Servers close idle connections (the
                                       Go sandbox-router after 120 s) and a
                                       tunnel may hide that close: through
                                       kwok's port-forward the connection
                                       stays open on our side and a request
                                       sent on it is never answered. Keep it
                                       under the server's idle timeout */
    asb_retry_policy retry;
    const char *proxy_url;          /* http://[user:pass@]host:port, used
                                       with CONNECT for every request;
                                       default none. user:pass: at most
                                       4096 bytes. An https:// proxy is
                                       refused (ASB_ERR_PROXY): TLS to
                                       the proxy is not implemented */
    int proxy_from_environment;     /* default 0. 1: HTTPS_PROXY /
                                       HTTP_PROXY / NO_PROXY (and lower
                                       case) when proxy_url is unset */
    const char *user_agent;         /* default "agentsandbox.h/<version>" */
    asb_logger log;                 /* default none; ids "http.retry",
                                       "http.stale" */
    /* Default NULL: TCP to the URL's host and port (or the proxy). Else
       every new connection comes from this callback: a connected stream
       socket for host:port in *fd (the client owns and closes it; TLS,
       for https, runs on top). Returns ASB_OK or fills err; its code is
       the request's. How asb_portforward_dial carries a client's
       connections through the apiserver; the proxy is not used. */
    asb_result (*dial)(void *user_data, const char *host, int port, int *fd,
                       asb_error *err);
    void *dial_user_data;
} asb_http_client_desc;

/* Owns the connection pool and the TLS state. Thread safety: requests may
   run from several threads at once (the pool is locked; each request uses
   its own connection). Free only when no request is running. */
typedef struct asb_http_client asb_http_client;

/* Makes a client from `desc` (NULL or zeroed: every default above). The
   description is copied: desc and its strings may go away after the call;
   CA, certificate and key files are read now.
   Errors: ASB_ERR_TLS_CONFIG (a CA, certificate or key that cannot be
   read or parsed), ASB_ERR_INVALID_ARGUMENT (a bad proxy_url or
   user_agent, a half-filled allocator).
   Ownership: *out is the caller's; free it with asb_http_client_free. */
ASB_API asb_result asb_http_client_create(const asb_http_client_desc *desc,
                                          asb_http_client **out,
                                          asb_error *err);
/* Closes the pooled connections and frees the client. NULL is harmless.
   Threads: only once no request on the client is running. */
ASB_API void asb_http_client_free(asb_http_client *client);

typedef struct asb_http_header {
    const char *name;
    const char *value;
} asb_http_header;

/* A streamed request body: fill buf[0, cap) and return the byte count, 0
   at the end, or -1 to abort the request. */
typedef long (*asb_read_fn)(void *user_data, char *buf, size_t cap);
/* Response bytes as they arrive; any result but ASB_OK aborts. */
typedef asb_result (*asb_write_fn)(void *user_data, const char *data,
                                   size_t len);

typedef struct asb_http_request {
    const char *method;             /* default "GET" */
    const char *url;                /* absolute http(s) URL */
    const asb_http_header *headers; /* names and values may not contain CR,
                                       LF or NUL; Host, Content-Length,
                                       Transfer-Encoding and Connection are
                                       the library's */
    size_t header_count;
    const void *body;               /* body_len bytes from memory, or ... */
    asb_read_fn body_read;          /* ... exactly body_len bytes from here */
    void *body_read_user;
    uint64_t body_len;
    asb_write_fn on_body;           /* stream a 2xx body here instead of
                                       buffering it (no size cap) */
    void *on_body_user;
    int timeout_ms;                 /* whole call, retries included;
                                       default 0: none beyond the client's
                                       connect and read timeouts */
    int read_timeout_ms;            /* longest wait for the next byte;
                                       default 0: the client's (a watch
                                       needs more than its server timeout) */
    size_t max_body_bytes;          /* cap on the buffered body; default 0:
                                       the client's */
    int fresh_connection;           /* default 0: reuse a pooled connection.
                                       1: open a new one (a long stream such
                                       as a watch leaves the pooled ones to
                                       the short calls around it) */
    const asb_retry_policy *retry;  /* default NULL: the client's policy */
    const asb_cancel *cancel;       /* default NULL. Triggered: the call
                                       (connect, send, wait, retry pause)
                                       ends with ASB_ERR_CANCELLED */
} asb_http_request;

typedef struct asb_http_response {
    int status;
    const asb_http_header *headers; /* as received, in order */
    size_t header_count;
    asb_buf body;      /* the body when not streamed; for a failure status
                          also when streamed (capped at max_body_bytes) */
    int attempts;      /* how many attempts the call made */
    char *head_;       /* internal: storage behind headers */
    asb_allocator alloc_;
} asb_http_response;

/* Performs a request. ASB_OK for a 1xx/2xx final status; a 3xx is
   ASB_ERR_HTTP_REDIRECT (never followed); 4xx/5xx (after retries) is
   ASB_ERR_HTTP_STATUS. In every case where a response arrived, *resp holds
   its status, headers and (capped) body; on failure err->http_status and
   err->body (first bytes) say the same.
   Errors: the transport's (ASB_ERR_DNS, _CONNECT, _SEND, _RECV, _PROXY,
   _TIMEOUT, the TLS codes, ASB_ERR_HTTP_PROTOCOL, _SHORT_BODY), then
   ASB_ERR_HTTP_REDIRECT and ASB_ERR_HTTP_STATUS as above;
   ASB_ERR_TOO_LARGE for a buffered body over max_body_bytes, or any
   error an on_body callback returns.
   Ownership: free *resp with asb_http_response_free whatever the result.
   req and everything it points to are only read during the call.
   Threads: any number of threads may call this on one client at once. */
ASB_API asb_result asb_http_do(asb_http_client *client,
                               const asb_http_request *req,
                               asb_http_response *resp, asb_error *err);

/* The first value of a header (names compare case-insensitively), or
   NULL. Ownership: borrowed, lives as long as the response. */
ASB_API const char *asb_http_response_header(const asb_http_response *resp,
                                             const char *name);
/* Frees the headers and the body; the struct may be reused. Harmless on a
   response asb_http_do failed to fill, and twice. */
ASB_API void asb_http_response_free(asb_http_response *resp);

/* One file part of a multipart/form-data body, for streaming: send `head`,
   then the file bytes, then `tail`; the total is head.len + file size +
   tail.len. The field name and filename are quoted-strings with `"` and
   `\` backslash-escaped (as the runtimes decode them), CR -> %0D, LF ->
   %0A; a NUL in either is refused. */
typedef struct asb_multipart {
    asb_buf head;
    asb_buf tail;
    char content_type[96]; /* for the Content-Type request header */
} asb_multipart;
/* Builds head, tail and content_type for one file part (a fresh random
   boundary each time; `alloc` NULL: libc).
   Errors: ASB_ERR_INVALID_ARGUMENT (a NUL or other forbidden byte in the
   names), ASB_ERR_IO (no randomness for the boundary).
   Ownership: free with asb_multipart_free after the request. */
ASB_API asb_result asb_multipart_init(asb_multipart *mp, const char *field,
                                      const char *filename,
                                      const asb_allocator *alloc);
/* Frees head and tail. Harmless twice. */
ASB_API void asb_multipart_free(asb_multipart *mp);

/* ==========================================================================
   HTTP/2, gRPC and protobuf (see "HTTP2 AND GRPC" at the top)
   ========================================================================== */

/* One HTTP/2 connection (h2c with prior knowledge, or TLS with ALPN h2).
   Several threads may open and use streams on it at once; create and free
   it from one thread, after every stream on it is freed. */
typedef struct asb_h2_conn asb_h2_conn;
/* One request/response exchange on a connection. One thread at a time,
   except asb_h2_stream_cancel, which any thread may call. */
typedef struct asb_h2_stream asb_h2_stream;

typedef struct asb_h2_desc {
    const char *url;             /* "http://host:port" (h2c, prior knowledge)
                                    or "https://host:port" (TLS, ALPN h2);
                                    required; a path is ignored */
    const asb_allocator *allocator; /* default NULL: libc */
    asb_logger log;              /* default: nothing logged */
    asb_tls_config tls;          /* https only; verification on by default */
    int connect_timeout_ms;      /* default 10000 (TCP and TLS handshake) */
    uint32_t stream_window;      /* default 1 MiB: the receive window of each
                                    stream, so the most a slow reader makes us
                                    buffer per stream; 65535..2^31-1 */
    uint32_t max_frame_size;     /* default 16384: the largest frame we accept;
                                    16384..16777215 */
    size_t max_header_list_bytes; /* default 65536: a response header or
                                    trailer block larger than this (RFC 7541
                                    size: name + value + 32 per field) fails
                                    its stream with ASB_ERR_TOO_LARGE */
    /* default NULL: TCP to the URL's host and port. Else the connection's
       socket comes from this callback, as asb_http_client_desc.dial (a
       port-forward stream: asb_portforward_dial); TLS runs on top. */
    asb_result (*dial)(void *user_data, const char *host, int port, int *fd,
                       asb_error *err);
    void *dial_user_data;
} asb_h2_desc;

/* A request header: NUL-terminated name (lowercase, as HTTP/2 requires)
   and value; values with CR, LF or NUL are refused. */
typedef struct asb_h2_header {
    const char *name;
    const char *value;
} asb_h2_header;

typedef struct asb_h2_request {
    const char *method;          /* default "GET" */
    const char *path;            /* default "/" */
    const char *authority;       /* default the URL's host:port */
    const asb_h2_header *headers; /* more headers; header_count of them */
    size_t header_count;
    int end_stream;              /* 1: no body follows the headers */
    int timeout_ms;              /* default 0: none; else a deadline for
                                    every wait on this stream, counted from
                                    the open: ASB_ERR_TIMEOUT after it */
} asb_h2_request;

/* Connects, sends the preface and our SETTINGS, and starts the
   connection's I/O thread (it answers PING and SETTINGS, applies flow
   control and reads ahead no more than the windows allow). Errors: those
   of a connection (ASB_ERR_DNS, _CONNECT, _TIMEOUT, TLS codes), and
   ASB_ERR_HTTP_PROTOCOL when a TLS server does not choose h2.
   Ownership: *out is the caller's; free it with asb_h2_conn_free. */
ASB_API asb_result asb_h2_connect(const asb_h2_desc *desc, asb_h2_conn **out,
                                  asb_error *err);
/* Sends GOAWAY, stops the I/O thread, closes. Free every stream first. */
ASB_API void asb_h2_conn_free(asb_h2_conn *conn);
/* 1 when new streams may still be opened: no GOAWAY received, no
   connection error, not closed by the peer. */
ASB_API int asb_h2_conn_usable(asb_h2_conn *conn);

/* Opens a stream and sends the request headers (waiting, within the
   request's deadline, while the peer's concurrent stream limit is
   reached). After a GOAWAY it fails with ASB_ERR_CLOSED.
   Ownership: *out is the caller's; free it with asb_h2_stream_free
   before the connection. */
ASB_API asb_result asb_h2_stream_open(asb_h2_conn *conn, const asb_h2_request *req,
                                      asb_h2_stream **out, asb_error *err);
/* Sends body bytes as DATA frames within the peer's windows (it waits for
   WINDOW_UPDATE, never buffers past them); end_stream 1 ends the body.
   Errors: ASB_ERR_TIMEOUT (the request's deadline, waiting for window),
   ASB_ERR_CANCELLED, ASB_ERR_CLOSED (the stream or connection is over). */
ASB_API asb_result asb_h2_stream_write(asb_h2_stream *s, const void *data, size_t len,
                                       int end_stream, asb_error *err);
/* Waits for the response headers (1xx skipped).
   Errors: ASB_ERR_TIMEOUT, ASB_ERR_CANCELLED, ASB_ERR_CLOSED (reset,
   GOAWAY past this stream, or the connection broke; the message says
   which), ASB_ERR_HTTP_PROTOCOL (the stream ended without headers). */
ASB_API asb_result asb_h2_stream_wait_headers(asb_h2_stream *s, asb_error *err);
/* The :status, or 0 before the headers arrived. */
ASB_API int asb_h2_stream_status(asb_h2_stream *s);
/* Looks a response header (trailer: the trailers) up by its lowercase name.
   1 and *value (borrowed until asb_h2_stream_free) when present, else 0. */
ASB_API int asb_h2_stream_header(asb_h2_stream *s, const char *name, asb_str *value);
ASB_API int asb_h2_stream_trailer(asb_h2_stream *s, const char *name, asb_str *value);
/* Reads body bytes: ASB_OK with *n > 0, or *n == 0 once the body ended
   (the trailers are then in). Reading is what opens the window again: a
   reader that stops holds at most desc.stream_window bytes here.
   Errors: ASB_ERR_TIMEOUT, ASB_ERR_CANCELLED, ASB_ERR_CLOSED, as for
   asb_h2_stream_wait_headers. */
ASB_API asb_result asb_h2_stream_read(asb_h2_stream *s, void *buf, size_t cap,
                                      size_t *n, asb_error *err);
/* RST_STREAM(CANCEL) unless the stream is over; a waiting read or write on
   it returns ASB_ERR_CANCELLED. Any thread; idempotent. */
ASB_API void asb_h2_stream_cancel(asb_h2_stream *s);
/* Cancels the stream if still open, and frees it. */
ASB_API void asb_h2_stream_free(asb_h2_stream *s);

/* -- gRPC --------------------------------------------------------------------- */

typedef struct asb_grpc_call asb_grpc_call;

typedef struct asb_grpc_call_desc {
    const char *method;          /* "/package.Service/Method"; required */
    int timeout_ms;              /* default 0: no deadline; else sent as
                                    grpc-timeout and enforced here too */
    size_t max_message_bytes;    /* default 4 MiB: a larger response message
                                    cancels the call, ASB_ERR_TOO_LARGE */
    const asb_h2_header *metadata; /* more request headers (lowercase names) */
    size_t metadata_count;
} asb_grpc_call_desc;

typedef struct asb_grpc_handlers {
    /* One complete response message, borrowed until the return. Return 0
       to go on; anything else cancels the call (ASB_ERR_CANCELLED). */
    int (*on_message)(void *user_data, const char *msg, size_t len);
    /* Called exactly once, last, with the call's result; err is never NULL
       (its code is result; ASB_OK: message empty). */
    void (*on_done)(void *user_data, asb_result result, const asb_error *err);
    void *user_data;
} asb_grpc_handlers;

/* Starts a call with one request message (unary and server-streaming
   calls; the request side is closed after it). The deadline counts from
   here. On failure *out is NULL and no handler will ever run.
   Ownership: *out is the caller's; free it with asb_grpc_call_free after
   asb_grpc_call_run returned. */
ASB_API asb_result asb_grpc_call_start(asb_h2_conn *conn, const asb_grpc_call_desc *desc,
                                       const void *req, size_t req_len,
                                       asb_grpc_call **out, asb_error *err);
/* Delivers the response messages to on_message, in order, on this thread,
   then calls on_done once, and returns the same result:
     ASB_OK                   grpc-status 0
     ASB_ERR_GRPC_STATUS      another status: err->reason is its name
                              ("NOT_FOUND"), err->message has the
                              percent-decoded grpc-message
     ASB_ERR_TIMEOUT          the deadline passed (here or at the server:
                              reason "DEADLINE_EXCEEDED")
     ASB_ERR_CANCELLED        asb_grpc_call_cancel or on_message said stop
                              (or the server said CANCELLED)
     ASB_ERR_TOO_LARGE        a message above max_message_bytes
     ASB_ERR_HTTP_STATUS      a non-200 :status without grpc-status
     ASB_ERR_HTTP_PROTOCOL    not gRPC (content-type, a compressed message,
                              a truncated message, no grpc-status), or an
                              HTTP/2 error
   Run a call once. */
ASB_API asb_result asb_grpc_call_run(asb_grpc_call *call, const asb_grpc_handlers *h,
                                     asb_error *err);
/* Cancels the call (RST_STREAM CANCEL). Any thread, any time before
   asb_grpc_call_free; idempotent. */
ASB_API void asb_grpc_call_cancel(asb_grpc_call *call);
/* The grpc-status the server sent, or -1 (none yet, or none at all). */
ASB_API int asb_grpc_call_status(const asb_grpc_call *call);
/* Cancels the call if still open and frees it. NULL is harmless. */
ASB_API void asb_grpc_call_free(asb_grpc_call *call);

/* A unary call: exactly one response message, appended to *resp (an
   initialised asb_buf). Errors: as asb_grpc_call_run's table.
   Ownership: resp is the caller's (asb_buf_free), also after a failure. */
ASB_API asb_result asb_grpc_unary(asb_h2_conn *conn, const asb_grpc_call_desc *desc,
                                  const void *req, size_t req_len, asb_buf *resp,
                                  asb_error *err);

/* -- protobuf -------------------------------------------------------------------
   The wire format by hand: a writer appending fields to an asb_buf, and a
   reader walking one message's fields. Proto3 semantics are the caller's:
   the writer writes what it is given (skip zero values yourself), the
   reader hands every field over, known or not, so repeated fields and map
   entries (repeated messages with key 1, value 2) arrive one by one. */

enum {
    ASB_PB_VARINT = 0,
    ASB_PB_FIXED64 = 1,
    ASB_PB_LEN = 2,
    ASB_PB_GROUP_START = 3, /* deprecated groups: skipped whole by the reader */
    ASB_PB_GROUP_END = 4,
    ASB_PB_FIXED32 = 5
};

/* The writer: each call appends one field (its tag, then the value) to b.
   uint64, uint32, bool and enum values go through put_varint.
   Errors: ASB_ERR_INVALID_ARGUMENT (field number 0 or above 2^29-1),
   ASB_ERR_OUT_OF_MEMORY.
   Ownership: b is the caller's (asb_buf_free). */
ASB_API asb_result asb_pb_put_varint(asb_buf *b, uint32_t field, uint64_t v);
/* int32 and enum: negative values take ten bytes, as the format says. */
ASB_API asb_result asb_pb_put_int32(asb_buf *b, uint32_t field, int32_t v);
ASB_API asb_result asb_pb_put_bytes(asb_buf *b, uint32_t field, const void *p, size_t n);
ASB_API asb_result asb_pb_put_string(asb_buf *b, uint32_t field, const char *s);
/* A nested message: begin writes the tag and returns a mark; the fields
   follow; end(mark) inserts their length. */
ASB_API asb_result asb_pb_begin(asb_buf *b, uint32_t field, size_t *mark);
ASB_API asb_result asb_pb_end(asb_buf *b, size_t mark);

typedef struct asb_pb_reader {
    const unsigned char *pos;
    const unsigned char *end;
} asb_pb_reader;

typedef struct asb_pb_field {
    uint32_t number;    /* 0: the end of the message */
    int wire_type;      /* ASB_PB_* */
    uint64_t value;     /* varint, fixed64, fixed32 */
    asb_str bytes;      /* LEN: borrowed from the reader's input */
} asb_pb_field;

/* A reader over p[0, n) (borrowed: it must outlive the reader and every
   field's bytes). Plain data, nothing to free; cannot fail. */
ASB_API void asb_pb_reader_init(asb_pb_reader *r, const void *p, size_t n);
/* The next field, or number 0 at the end. ASB_ERR_PROTOBUF_INVALID for
   malformed input (a truncated or overlong varint, a length past the end,
   field number 0 or above 2^29-1, wire types 6 and 7, an unmatched group);
   the reader then stays failed. Never reads outside the input. */
ASB_API asb_result asb_pb_next(asb_pb_reader *r, asb_pb_field *f, asb_error *err);
/* Typed views of a field; ASB_ERR_PROTOBUF_INVALID on the wrong wire type
   (int32 takes the low 32 bits, as protobuf does; bool any non-zero). */
ASB_API asb_result asb_pb_int32(const asb_pb_field *f, int32_t *out);
ASB_API asb_result asb_pb_uint32(const asb_pb_field *f, uint32_t *out);
ASB_API asb_result asb_pb_bytes(const asb_pb_field *f, asb_str *out);

/* ==========================================================================
   kubeconfig
   ========================================================================== */

typedef struct asb_kubeconfig_desc {
    const char *path;     /* one file, loaded alone (kubectl --kubeconfig);
                             default NULL: `paths`, else the KUBECONFIG
                             list (':'-separated, merged with kubectl's
                             rules), else ~/.kube/config */
    const char *context;  /* default NULL: the current-context */
    const asb_allocator *allocator; /* default NULL: libc */
    const char *const *paths; /* default NULL. Several files merged with
                             kubectl's rules exactly as the same list in
                             KUBECONFIG would be (the first file to name a
                             context, cluster or user wins; the first
                             current-context wins; missing files are
                             skipped, at most 32), without touching the
                             process environment. Only with path NULL. The
                             local tunnel's kubectl gets the list in its
                             own KUBECONFIG */
    size_t path_count;
} asb_kubeconfig_desc;

/* An exec credential plugin as configured (client.authentication.k8s.io). */
typedef struct asb_kube_exec {
    const char *command;        /* resolved against the file when it has a
                                   '/'; a bare name is looked up in PATH's
                                   absolute entries only (as kubectl:
                                   never the working directory) */
    const char *const *args;
    size_t arg_count;
    const char *const *env_names;
    const char *const *env_values;
    size_t env_count;
    const char *api_version;    /* client.authentication.k8s.io/v1 or v1beta1 */
    const char *install_hint;   /* NULL when absent */
    const char *interactive_mode; /* Never, IfAvailable, Always; NULL: unset */
    int provide_cluster_info;
} asb_kube_exec;

/* The resolved connection for one context: what kubectl would use. Every
   string is NUL-terminated and owned by the config (NULL when unset);
   file contents (CA, client certificate and key) are already read, and
   `*-data` fields decoded. Free with asb_kube_config_free. Secrets (token,
   password, key) never appear in error messages. */
typedef struct asb_kube_config {
    const char *context;          /* names */
    const char *cluster;
    const char *user;
    const char *server;           /* https://host:port[/prefix] */
    const char *default_namespace; /* the context's, else "default" */
    const char *tls_server_name;
    const char *proxy_url;
    int insecure_skip_tls_verify;
    const char *ca;               /* PEM or DER bytes */
    size_t ca_len;
    const char *client_cert;
    size_t client_cert_len;
    const char *client_key;
    size_t client_key_len;
    const char *token;            /* bearer token (token wins over tokenFile) */
    const char *token_file;       /* absolute; re-read by the REST layer */
    const char *username;         /* basic auth */
    const char *password;
    const asb_kube_exec *exec;    /* NULL when the user has no exec plugin */
    const char *auth_provider;    /* name of a legacy auth-provider, if any */
    const char *user_origin;      /* the file the user stanza came from */
    void *arena_;                 /* internal */
    asb_allocator alloc_;
} asb_kube_config;

/* Loads and resolves a kubeconfig as kubectl would (desc NULL: every
   default above).
   Errors: ASB_ERR_KUBECONFIG with the file and line (YAML, wrong types,
   bad base64, unreadable files named by the config) or what is missing
   (no kubeconfig at all, no context, unknown context, cluster or user).
   Ownership: on success free *out with asb_kube_config_free; on failure
   it needs no free. */
ASB_API asb_result asb_kubeconfig_load(const asb_kubeconfig_desc *desc,
                                       asb_kube_config *out, asb_error *err);
/* Frees every string of the config, wiping secrets first. Harmless
   twice. */
ASB_API void asb_kube_config_free(asb_kube_config *cfg);

/* The TLS settings of a resolved config, for an asb_http_client_desc.
   Cannot fail.
   Ownership: borrowed views; they live as long as cfg. */
ASB_API void asb_kube_config_tls(const asb_kube_config *cfg, asb_tls_config *tls);

/* ==========================================================================
   Kubernetes: credentials, REST and watch
   ========================================================================== */

/* Reads the in-cluster configuration: KUBERNETES_SERVICE_HOST and _PORT,
   the service account's token (kept as a token file, re-read since it
   rotates), CA and namespace (POD_NAMESPACE first). `sa_dir` overrides
   /var/run/secrets/kubernetes.io/serviceaccount (tests); `alloc` NULL:
   libc.
   Errors: ASB_ERR_KUBECONFIG (not in a pod: the variables are unset, or
   the token or CA cannot be read; the message says which).
   Ownership: on success free *out with asb_kube_config_free. */
ASB_API asb_result asb_kube_config_in_cluster(const char *sa_dir,
                                              const asb_allocator *alloc,
                                              asb_kube_config *out, asb_error *err);

typedef struct asb_kube_client_desc {
    asb_kubeconfig_desc kubeconfig; /* where the configuration comes from */
    int in_cluster;                 /* default 0: the kubeconfig, or, in a
                                       pod with no kubeconfig at all (no
                                       path or paths, KUBECONFIG unset or
                                       empty, no ~/.kube/config) whose
                                       KUBERNETES_SERVICE_HOST/_PORT and
                                       service-account token are there,
                                       the pod's service account, as the
                                       reference does. 1: always the
                                       service account
                                       (asb_kube_config_in_cluster) */
    const char *service_account_dir; /* with in_cluster; default the
                                       standard path */
    asb_http_client_desc http;      /* timeouts, retries, limits; its tls
                                       and proxy come from the config */
    int exec_timeout_ms;            /* default 30000: an exec credential
                                       plugin that runs longer is killed */
} asb_kube_client_desc;

/* Talks to one apiserver as one user. Thread safety: calls may run from
   several threads at once (credential refreshes are locked). An exec
   plugin's new client certificate takes effect for calls that start
   after it; a call already running (a watch) keeps the connection and
   certificate it began with until it ends or reconnects. */
typedef struct asb_kube_client asb_kube_client;

/* Loads the configuration (kubeconfig, or in-cluster) and makes the
   client; desc NULL or zeroed: the current context of $KUBECONFIG, else
   ~/.kube/config, and every HTTP default. Nothing is sent yet: a server
   that is down shows up at the first call.
   Errors: those of asb_kubeconfig_load / asb_kube_config_in_cluster,
   ASB_ERR_CREDENTIALS (a legacy auth-provider, refused with advice),
   ASB_ERR_TLS_CONFIG (the config's CA, certificate or key).
   Ownership: *out is the caller's; free with asb_kube_client_free. */
ASB_API asb_result asb_kube_client_create(const asb_kube_client_desc *desc,
                                          asb_kube_client **out, asb_error *err);
/* Frees the client and its configuration. NULL is harmless.
   Threads: only once no call on the client is running. */
ASB_API void asb_kube_client_free(asb_kube_client *kc);
/* The resolved configuration in use (server, namespace, user, ...).
   Ownership: borrowed; lives as long as the client. */
ASB_API const asb_kube_config *asb_kube_client_config(const asb_kube_client *kc);

/* A resource type: group "" is the core API (/api/v1). */
typedef struct asb_kube_resource {
    const char *group;
    const char *version;
    const char *plural;
} asb_kube_resource;

/* One REST call: method and a path relative to the server
   ("/apis/<group>/<version>/namespaces/<ns>/<plural>/<name>?..."), with an
   optional JSON body (content_type default application/json). The answer
   body goes to `out` (may be NULL). A failure status decodes the
   apiserver's Status: err->http_status, err->reason ("NotFound", ...) and
   err->message carry it; 404 is ASB_ERR_NOT_FOUND, other statuses
   ASB_ERR_KUBE_API. A 401 re-runs an exec credential plugin once and
   retries.
   Errors: ASB_ERR_NOT_FOUND, ASB_ERR_KUBE_API (a 403 from RBAC among
   them: err->reason "Forbidden", err->message the apiserver's own words),
   ASB_ERR_CREDENTIALS (a token file or exec plugin failed), and the
   transport codes of asb_http_do.
   Ownership: out (appended to) is the caller's.
   Threads: any number of threads may call the client at once; so for
   every asb_kube_* call below. */
ASB_API asb_result asb_kube_request(asb_kube_client *kc, const char *method,
                                    const char *path, const char *content_type,
                                    const char *body, size_t body_len, asb_buf *out,
                                    asb_error *err);

/* Typed helpers for namespaced objects; names and namespaces must be
   DNS-1123 names (checked), the JSON is the caller's (read during the
   call). create and get append the object's JSON to out (may be NULL).
   Errors: those of asb_kube_request; ASB_ERR_INVALID_ARGUMENT for a bad
   name or namespace, before anything is sent. */
ASB_API asb_result asb_kube_create(asb_kube_client *kc, const asb_kube_resource *res,
                                   const char *ns, const char *json, size_t len,
                                   asb_buf *out, asb_error *err);
ASB_API asb_result asb_kube_get(asb_kube_client *kc, const asb_kube_resource *res,
                                const char *ns, const char *name, asb_buf *out,
                                asb_error *err);
/* DELETE; a missing object is ASB_ERR_NOT_FOUND (callers that want
   "already gone is fine" check for it). */
ASB_API asb_result asb_kube_delete(asb_kube_client *kc, const asb_kube_resource *res,
                                   const char *ns, const char *name, asb_error *err);
/* DELETE only while the object still has this UID (DeleteOptions
   preconditions.uid): an object deleted and re-created under the same
   name meanwhile is left alone and the call is ASB_ERR_KUBE_API with
   http_status 409 (reason "Conflict"). uid NULL or "": asb_kube_delete. */
ASB_API asb_result asb_kube_delete_uid(asb_kube_client *kc, const asb_kube_resource *res,
                                       const char *ns, const char *name, const char *uid,
                                       asb_error *err);
/* JSON merge patch (custom resources refuse strategic merge patches);
   the patched object's JSON is appended to out (may be NULL).
   Errors: those of asb_kube_request. */
ASB_API asb_result asb_kube_patch(asb_kube_client *kc, const asb_kube_resource *res,
                                  const char *ns, const char *name, const char *json,
                                  size_t len, asb_buf *out, asb_error *err);

typedef struct asb_kube_list_opts {
    const char *label_selector; /* default NULL: all */
    const char *field_selector; /* default NULL */
    int limit;                  /* default 0: no paging */
    const char *continue_token; /* from the previous page's metadata.continue */
} asb_kube_list_opts;
/* One page of a collection (opts NULL: everything, unpaged) appended to
   out as the apiserver's List JSON; metadata.continue names the next page.
   Errors: those of asb_kube_request. */
ASB_API asb_result asb_kube_list(asb_kube_client *kc, const asb_kube_resource *res,
                                 const char *ns, const asb_kube_list_opts *opts,
                                 asb_buf *out, asb_error *err);

typedef enum asb_watch_type {
    ASB_WATCH_ADDED = 1,
    ASB_WATCH_MODIFIED,
    ASB_WATCH_DELETED,
    ASB_WATCH_BOOKMARK,
    ASB_WATCH_ERROR
} asb_watch_type;

/* One complete event. `doc` holds the whole event line; `object` is the
   token of its "object" member. Both live only during the callback. */
typedef struct asb_watch_event {
    asb_watch_type type;
    const asb_json_doc *doc;
    int object;
    const char *resource_version; /* the object's, "" when absent */
} asb_watch_event;

/* Return 0 to go on, 1 to stop the watch successfully, or a negative
   asb_result to stop it with that error. */
typedef int (*asb_watch_fn)(void *user_data, const asb_watch_event *ev);

typedef struct asb_watch_opts {
    const char *label_selector;
    const char *field_selector;   /* e.g. "metadata.name=x" */
    const char *resource_version; /* start after it; default NULL: the
                                     current state arrives as ADDED events */
    int timeout_seconds;          /* per request, the server ends it; the
                                     watch then resumes; default 60 */
    int deadline_ms;              /* whole watch; default 0: no deadline */
    size_t max_event_bytes;       /* one event line; default 16 MiB */
    const asb_cancel *cancel;     /* default NULL. Triggered: the watch
                                     (waiting for events or pausing before
                                     a resume) ends with ASB_ERR_CANCELLED */
    int gone_ends_watch;          /* default 0: after 410 Gone the watch
                                     starts again from "0" (the current
                                     state arrives as ADDED events; what
                                     was deleted in the gap is not seen).
                                     1: the watch ends with
                                     ASB_ERR_KUBE_API, err->http_status
                                     410, so the caller can list afresh
                                     and compare, as an informer does */
    int bookmarks_to_callback;    /* default 0: BOOKMARK events only move
                                     the resume point. 1: fn gets them too
                                     (their resource_version is where a
                                     later watch may resume) */
} asb_watch_opts;

/* Streams events until the callback stops it, the deadline passes
   (ASB_ERR_TIMEOUT) or a non-recoverable error. It resumes from the last
   resourceVersion seen (bookmarks included) when the server ends the
   stream, the connection drops or the apiserver answers 429 or 5xx (as
   it does while restarting), and restarts from "0" after 410 Gone
   (as an HTTP status or an ERROR event), after a short pause that grows
   (to 5 s, jittered) while 410s follow each other with no event between
   them; a stream the server ends within a second with no event is
   resumed after the same pause. Waiting costs no CPU: it sleeps in poll. Callbacks run on the
   calling thread; the return value is the single final outcome.
   Errors: ASB_ERR_TIMEOUT (the deadline; the message names the last
   failure), what the callback returned, ASB_ERR_TOO_LARGE (an event over
   max_event_bytes), ASB_ERR_JSON_INVALID (an event that is not JSON),
   ASB_ERR_KUBE_API / _NOT_FOUND / _CREDENTIALS for a refused watch, and
   transport codes once resuming gives up.
   Threads: fn runs on the calling thread, never concurrently with
   itself. */
ASB_API asb_result asb_kube_watch(asb_kube_client *kc, const asb_kube_resource *res,
                                  const char *ns, const asb_watch_opts *opts,
                                  asb_watch_fn fn, void *user_data, asb_error *err);

/* ==========================================================================
   Kubernetes: WebSocket and port-forward, no kubectl
   ========================================================================== */

/* A WebSocket (RFC 6455) to the apiserver, opened with the kube client's
   credentials (every kind, exec plugins included) over the same HTTP/1.1
   and TLS code as REST calls. Messages go out as single masked frames
   (Kubernetes' servers read every frame as a whole message); messages in
   may be fragmented and are handed over whole. Pings are answered inside
   asb_ws_recv. One thread at a time per handle. */
typedef struct asb_ws asb_ws;

typedef enum asb_ws_opcode {
    ASB_WS_CONTINUATION = 0x0,
    ASB_WS_TEXT = 0x1,
    ASB_WS_BINARY = 0x2,
    ASB_WS_CLOSE = 0x8,
    ASB_WS_PING = 0x9,
    ASB_WS_PONG = 0xA
} asb_ws_opcode;

typedef struct asb_ws_desc {
    const char *path;          /* required: from '/', with its query, e.g.
                                  "/api/v1/namespaces/NS/pods/P/portforward
                                  ?ports=8080" */
    const char *protocol;      /* Sec-WebSocket-Protocol asked for (one, or
                                  a comma-separated list); default NULL:
                                  none */
    size_t max_message_bytes;  /* largest message taken (after
                                  reassembly); default 4 MiB; more is a
                                  close with 1009 and ASB_ERR_TOO_LARGE */
    int timeout_ms;            /* connect, TLS and the upgrade answer;
                                  default 30000 */
    int write_timeout_ms;      /* one send blocked this long fails;
                                  default 30000 */
    const asb_cancel *cancel;  /* default NULL: the upgrade can be
                                  cancelled with it */
} asb_ws_desc;

/* One message handed over by asb_ws_recv: ASB_WS_TEXT or ASB_WS_BINARY.
   `data` is borrowed until the next call on the handle. */
typedef struct asb_ws_message {
    asb_ws_opcode opcode;
    asb_str data;
} asb_ws_message;

/* Opens the WebSocket: GET path with Upgrade, Sec-WebSocket-Key and
   -Version 13, the credentials, and the protocol; the answer must be 101
   with the matching Sec-WebSocket-Accept and, when the server names a
   protocol, one that was asked for. A 401 re-runs an exec plugin once.
   Errors: ASB_ERR_KUBE_API / ASB_ERR_NOT_FOUND with the apiserver's
   Status when it refuses (RBAC: http_status 403, reason "Forbidden", its
   message); ASB_ERR_WEBSOCKET when the server answers without switching
   protocols or breaks the handshake (the message says how); transport,
   TLS and credential codes as asb_kube_request.
   Ownership: free *out with asb_ws_free. The kube client must outlive it.
   Threads: any thread; the handle is then used by one thread at a time. */
ASB_API asb_result asb_kube_ws_connect(asb_kube_client *kc, const asb_ws_desc *desc,
                                       asb_ws **out, asb_error *err);
/* The protocol the server chose ("" for none). Borrowed, lives as long as
   the handle. */
ASB_API const char *asb_ws_protocol(const asb_ws *ws);
/* Sends one message (TEXT, BINARY, PING or PONG) as one masked frame.
   `prefix` (may be NULL, prefix_len 0) goes before `data` in the same
   message: the channel byte of Kubernetes' protocols without a copy.
   Errors: ASB_ERR_INVALID_ARGUMENT (a control message over 125 bytes, a
   bad opcode), ASB_ERR_CLOSED (a close was sent or received), ASB_ERR_SEND,
   ASB_ERR_TIMEOUT (write_timeout_ms). */
ASB_API asb_result asb_ws_send(asb_ws *ws, asb_ws_opcode opcode, const void *prefix,
                               size_t prefix_len, const void *data, size_t len,
                               asb_error *err);
/* Waits up to timeout_ms (<= 0: without limit) for the next data message.
   Pings are answered and pongs dropped on the way.
   Errors: ASB_ERR_CLOSED when the peer closed (the message holds its code
   and reason, also in asb_ws_close_code; a close is answered);
   ASB_ERR_TIMEOUT; ASB_ERR_WEBSOCKET when the peer broke RFC 6455 (a
   close with 1002 or 1007 is sent first); ASB_ERR_TOO_LARGE (1009);
   ASB_ERR_RECV when the connection ended without a close. */
ASB_API asb_result asb_ws_recv(asb_ws *ws, int timeout_ms, asb_ws_message *msg,
                               asb_error *err);
/* Sends a close (code 0: 1000 "normal closure"; reason may be NULL) and
   waits up to a second for the peer's, reading past data messages.
   Errors: ASB_ERR_INVALID_ARGUMENT (a code a client may not send, a
   reason over 123 bytes), ASB_ERR_SEND. */
ASB_API asb_result asb_ws_close(asb_ws *ws, int code, const char *reason, asb_error *err);
/* The peer's close code: 0 while none came, 1005 for a close without one. */
ASB_API int asb_ws_close_code(const asb_ws *ws);
/* Closes the connection (a close frame first if none was sent; no wait)
   and frees the handle. NULL is harmless. */
ASB_API void asb_ws_free(asb_ws *ws);

/* Where a Service's port leads, as kubectl port-forward svc/NAME decides:
   the Service's selector picks the pods; a Running, Ready pod without a
   deletion mark is chosen (the one Ready longest, then by name); the
   Service port (number or name) maps to its targetPort (a number, or a
   name looked up in the chosen pod's container ports). */
typedef struct asb_portforward_target {
    char pod[254];
    int port;          /* the pod's port */
} asb_portforward_target;

/* Resolves ns/service:port. ns NULL: the kube config's default namespace.
   Errors: ASB_ERR_NOT_FOUND (no such Service), ASB_ERR_KUBE_API (RBAC:
   reading services and pods needs get/list), ASB_ERR_PORT_FORWARD (no
   selector, no such service port, a named target port no container
   declares, no Running and Ready pod: the message lists what matched),
   ASB_ERR_INVALID_ARGUMENT. */
ASB_API asb_result asb_portforward_resolve(asb_kube_client *kc, const char *ns,
                                           const char *service, const char *port,
                                           asb_portforward_target *out, asb_error *err);

/* A port-forward to one pod port, kubectl-free: each asb_portforward_dial
   opens one WebSocket (v4.channel.k8s.io) to
   /api/v1/namespaces/NS/pods/POD/portforward?ports=P and hands back a
   connected socket whose bytes a relay thread carries to and from the
   pod's port: one stream per connection, as the protocol wants. */
typedef struct asb_portforward asb_portforward;

typedef struct asb_portforward_desc {
    const char *ns;           /* default NULL: the kube config's namespace */
    const char *service;      /* resolve through this Service (re-resolved
                                 after a failed stream); or NULL and: */
    const char *pod;          /* this pod, by name */
    const char *port;         /* required: the Service's port (number or
                                 name) with `service`, else the pod's port
                                 number */
    int timeout_ms;           /* resolve plus upgrade, per dial; default
                                 30000 */
    const asb_logger *log;    /* default NULL: none. Ids "portforward.*" */
} asb_portforward_desc;

/* Copies the description; nothing is sent yet.
   Errors: ASB_ERR_INVALID_ARGUMENT (no port; neither or both of service
   and pod; a pod port that is not a number 1-65535), ASB_ERR_OUT_OF_MEMORY.
   Ownership: free with asb_portforward_free; kc must outlive it. */
ASB_API asb_result asb_portforward_create(asb_kube_client *kc, const asb_portforward_desc *desc,
                                          asb_portforward **out, asb_error *err);
/* Opens one stream and returns its socket in *fd (close-on-exec,
   non-blocking; the caller's to close, which ends the stream). The pod
   found by the last resolve is reused until a stream to it fails; then
   the next dial resolves again. The first bytes the server sends (the
   port, on both channels) are checked before this returns.
   Errors: those of asb_portforward_resolve and asb_kube_ws_connect (RBAC
   on pods/portforward: ASB_ERR_KUBE_API, http_status 403 and the
   apiserver's message), ASB_ERR_PORT_FORWARD (the server refused the
   WebSocket upgrade: the message suggests the kubectl tunnel; it closed
   before naming the port), ASB_ERR_IO (no socket or thread).
   Threads: any number of threads may dial at once. */
ASB_API asb_result asb_portforward_dial(asb_portforward *pf, int *fd, asb_error *err);
/* The newest failure of a stream after its dial (the error channel's text
   as ASB_ERR_PORT_FORWARD, "error forwarding port 8080 to pod ...", or a
   dropped connection), copied into *err; 0 when no stream failed since
   the last call, 1 when one did (then cleared). */
ASB_API int asb_portforward_take_error(asb_portforward *pf, asb_error *err);
/* Streams opened so far and streams still relaying (tests, metrics). */
ASB_API void asb_portforward_counts(asb_portforward *pf, unsigned long *opened,
                                    unsigned long *live);
/* Ends every stream (their sockets see the end), waits for the relay
   threads and frees. NULL is harmless. Threads: no dial may be running. */
ASB_API void asb_portforward_free(asb_portforward *pf);

/* ==========================================================================
   Tracing and latency metrics (OpenTelemetry, no dependency)
   ========================================================================== */

/* A W3C trace context: the ids of a span and its flags (bit 0: sampled). */
typedef struct asb_trace_context {
    unsigned char trace_id[16];
    unsigned char span_id[8];
    unsigned char flags;
} asb_trace_context;

/* "00-<32 hex>-<16 hex>-<2 hex>" and its NUL. */
#define ASB_TRACEPARENT_SIZE 56

/* Reads a W3C traceparent header value (version 00; a later version is
   read by its first four fields, as the W3C spec asks). All-zero ids,
   upper-case hex and version ff are refused.
   Errors: ASB_ERR_INVALID_ARGUMENT, its message saying which field. */
ASB_API asb_result asb_traceparent_parse(const char *s, size_t len, asb_trace_context *out,
                                         asb_error *err);
/* Writes ctx as a traceparent value into out (NUL-terminated). Cannot
   fail. */
ASB_API void asb_traceparent_format(const asb_trace_context *ctx,
                                    char out[ASB_TRACEPARENT_SIZE]);

typedef enum asb_attr_type {
    ASB_ATTR_STRING = 1,
    ASB_ATTR_INT,
    ASB_ATTR_BOOL
} asb_attr_type;

/* One span attribute; str for ASB_ATTR_STRING, num for the others (a
   bool is 0 or 1). */
typedef struct asb_span_attr {
    const char *key;
    asb_attr_type type;
    const char *str;
    int64_t num;
} asb_span_attr;

/* A finished span, as asb_tracer_desc.on_span_end receives it. Every
   pointer is borrowed for the callback's duration only. */
typedef struct asb_span_data {
    const char *name;                /* "<service>.<operation>" */
    asb_trace_context ctx;           /* trace id, this span's id, flags */
    unsigned char parent_span_id[8]; /* all zero: a root span */
    int64_t start_unix_ns;
    int64_t end_unix_ns;
    const asb_span_attr *attrs;
    size_t attr_count;
    asb_result status;               /* ASB_OK, or the call's error code */
} asb_span_data;

/* Runs on the thread whose call ended the span; keep it short (the call
   returns after it). */
typedef void (*asb_span_end_fn)(void *user_data, const asb_span_data *span);

/* Tracing for an asb_client (asb_client_desc.tracer); see TRACING. */
typedef struct asb_tracer_desc {
    int enable;                    /* default 0: off, and free: no
                                      allocation, no clock read. 1: spans,
                                      propagation, latency histograms */
    const char *service_name;      /* default $OTEL_SERVICE_NAME, else
                                      "sandbox-client"; names the spans
                                      "<service>.<operation>" (at most
                                      100 bytes) */
    const char *parent;            /* default NULL. A traceparent value:
                                      every lifecycle span becomes its
                                      child, in its trace */
    const char *parent_state;      /* default NULL: the tracestate sent on
                                      with every traceparent (at most 512
                                      bytes) */
    asb_span_end_fn on_span_end;   /* default NULL: no callback */
    void *user_data;               /* for on_span_end */
    int otlp;                      /* default 0: the OTLP/HTTP exporter
                                      runs when an endpoint is set (below
                                      or $OTEL_EXPORTER_OTLP_ENDPOINT /
                                      _TRACES_ENDPOINT) or
                                      $OTEL_TRACES_EXPORTER is "otlp".
                                      1: always (endpoint default
                                      http://localhost:4318). -1: never */
    const char *otlp_endpoint;     /* default $OTEL_EXPORTER_OTLP_ENDPOINT,
                                      else http://localhost:4318; the
                                      exporter appends /v1/traces and
                                      /v1/metrics */
    const char *otlp_traces_endpoint;  /* default
                                      $OTEL_EXPORTER_OTLP_TRACES_ENDPOINT:
                                      the whole URL for spans */
    const char *otlp_metrics_endpoint; /* default
                                      $OTEL_EXPORTER_OTLP_METRICS_ENDPOINT:
                                      the whole URL for histograms */
    const char *otlp_headers;      /* default $OTEL_EXPORTER_OTLP_HEADERS:
                                      "k=v,k2=v2" (values percent-decoded;
                                      never logged), at most 16 */
    int otlp_timeout_ms;           /* default 10000: one export request;
                                      also bounds the flush in
                                      asb_client_free */
    int export_interval_ms;        /* default 1000: how long spans wait to
                                      be batched */
    size_t max_queued_spans;       /* default 2048: spans waiting for the
                                      exporter; more are dropped (counted,
                                      logged once) */
} asb_tracer_desc;

/* The latency histograms a traced client keeps (see TRACING). */
typedef enum asb_latency_kind {
    ASB_LATENCY_CREATE_READY = 0, /* create_sandbox, start to Ready */
    ASB_LATENCY_TUNNEL_START,     /* kubectl port-forward coming up */
    ASB_LATENCY_GATEWAY_DISCOVERY,/* the Gateway's address found */
    ASB_LATENCY_CREATE_CLAIM,     /* the claim's POST */
    ASB_LATENCY_WAIT_READY,       /* the claim's watch until Ready */
    ASB_LATENCY_DELETE,           /* a claim's DELETE */
    ASB_LATENCY_RUN,
    ASB_LATENCY_WRITE,
    ASB_LATENCY_READ,
    ASB_LATENCY_LIST,
    ASB_LATENCY_EXISTS,
    ASB_LATENCY_KIND_COUNT
} asb_latency_kind;

#define ASB_LATENCY_MAX_BUCKETS 24

/* One histogram series: the calls of one kind that succeeded, or those
   that failed. buckets[i] counts the calls of at most bounds_ms[i] ms
   (and more than bounds_ms[i-1]); buckets[bucket_count] those above the
   last bound. */
typedef struct asb_latency_stats {
    const char *metric;      /* the exported name, e.g.
                                "sandbox_client_call_latency_ms" */
    const char *label;       /* its attribute ("op" or "mode") */
    const char *label_value; /* e.g. "run", "port_forward" */
    uint64_t count;
    double sum_ms, min_ms, max_ms;
    size_t bucket_count;     /* bounds; buckets has one more */
    const double *bounds_ms; /* static storage */
    uint64_t buckets[ASB_LATENCY_MAX_BUCKETS + 1];
} asb_latency_stats;

/* ==========================================================================
   Sandboxes: the client and the sandbox handle
   ========================================================================== */

/* How the client reaches sandboxes. */
typedef enum asb_connection_mode {
    ASB_CONNECT_LOCAL_TUNNEL = 0, /* default: `kubectl port-forward` to the
                                     router Service, one per client */
    ASB_CONNECT_DIRECT,           /* a router URL you give */
    ASB_CONNECT_IN_CLUSTER,       /* straight to the pod: its IP (looked up
                                     once per handle, again when it stops
                                     answering), else the sandbox's service
                                     DNS name, <sandbox>.<ns>.svc.cluster.
                                     local (templates with `service: true`;
                                     always, once a lookup got 401/403: the
                                     account may not read Sandboxes); no
                                     router headers */
    ASB_CONNECT_GATEWAY,          /* the router behind a Gateway: the first
                                     valid status.addresses[] value (watched
                                     for until it appears) */
    ASB_CONNECT_NATIVE_TUNNEL,    /* the router Service through the
                                     apiserver's port-forward, from inside
                                     this process (asb_portforward: one
                                     WebSocket per connection, the kube
                                     client's credentials); sandboxd
                                     sandboxes: both their ports forwarded
                                     to their pod the same way. No
                                     kubectl, nothing spawned. Needs RBAC
                                     get (or create) on pods/portforward
                                     and get/list on services and pods
                                     in router_namespace */
    ASB_CONNECT_IN_POD            /* a program beside sandboxd in the same
                                     pod (its sidecar layout): sandboxd on
                                     sandboxd_rest_addr / _grpc_addr, no
                                     Kubernetes API at all; the one handle
                                     is asb_client_sandbox_in_pod's */
} asb_connection_mode;

/* The server in the sandbox, which decides how the handle's calls go on
   the wire (see RUNTIMES at the top). The handle API is the same on both;
   a few calls need sandboxd (ASB_ERR_UNSUPPORTED on the legacy one). */
typedef enum asb_runtime_kind {
    ASB_RUNTIME_LEGACY = 0, /* default: the HTTP/1.1 JSON runtime
                               (/execute, /upload, /download, /list,
                               /exists) on server_port, through any
                               connection mode */
    ASB_RUNTIME_SANDBOXD,   /* sandboxd (KEP-539.2): files over REST on
                               sandboxd_rest_port, processes over gRPC on
                               sandboxd_grpc_port. Reached with
                               ASB_CONNECT_LOCAL_TUNNEL (then one `kubectl
                               port-forward pod/<pod> :<rest> :<grpc>` per
                               sandbox, shared by its calls, stopped with
                               the handle, rebuilt when it dies),
                               ASB_CONNECT_IN_CLUSTER (the pod IP) or
                               ASB_CONNECT_IN_POD; not through a router
                               (direct_url, Gateway): ASB_ERR_INVALID_
                               ARGUMENT from asb_client_create */
    ASB_RUNTIME_AUTO        /* per sandbox, when it is created or
                               attached: sandboxd when its template's pod
                               spec declares SANDBOXD_REST_ADDR or
                               SANDBOXD_GRPC_ADDR, or has a container named
                               "sandboxd"; the legacy runtime otherwise
                               (also when the template cannot be read) */
} asb_runtime_kind;

typedef struct asb_client_desc {
    asb_kube_client_desc kube;     /* kubeconfig or in-cluster settings.
                                      kube.http's timeouts, retry policy
                                      and limits also govern the calls to
                                      sandboxes; its TLS and proxy do not
                                      (sandbox_tls below; no proxy) */
    asb_connection_mode mode;      /* default ASB_CONNECT_LOCAL_TUNNEL */
    const char *direct_url;        /* ASB_CONNECT_DIRECT: the router's URL
                                      (at most 512 bytes) */
    const char *router_namespace;  /* default "agent-sandbox-system" */
    const char *router_service;    /* default "sandbox-router-svc" */
    int router_port;               /* default 8080 */
    const char *kubectl_path;      /* default "kubectl" (searched on PATH) */
    int port_forward_ready_timeout_ms; /* default 30000 */
    int server_port;               /* the runtime's port; default 8888 */
    asb_runtime_kind runtime;      /* default ASB_RUNTIME_LEGACY */
    int sandboxd_rest_port;        /* sandboxd's REST port in the pod;
                                      default 8080 */
    int sandboxd_grpc_port;        /* sandboxd's gRPC port; default 9090 */
    const char *sandboxd_rest_addr; /* ASB_CONNECT_IN_POD: sandboxd's REST
                                      listener, "host:port" (a loopback
                                      address); default the environment's
                                      SANDBOXD_REST_ADDR */
    const char *sandboxd_grpc_addr; /* ASB_CONNECT_IN_POD: its gRPC
                                      listener; default SANDBOXD_GRPC_ADDR */
    const char *claim_api_version; /* default NULL: the cluster's preferred
                                      version, from API discovery ("v1alpha1"
                                      on agent-sandbox v0.4.x, "v1beta1" on
                                      v0.5.x) */
    int cleanup_on_free;           /* default 0. 1: asb_client_free deletes
                                      the claims of every live handle but
                                      those created with a claim_name (the
                                      caller's, as in the Python SDK). For
                                      cleanup at exit, call asb_client_free
                                      from your own atexit() function: the
                                      library registers none (no global
                                      state, see CONVENTIONS) */
    size_t max_output_bytes;       /* default 16 MiB: a command's output */
    size_t max_read_bytes;         /* default 256 MiB: a buffered read()
                                      (read_stream has no cap) */
    const char *router_token;      /* default NULL: sent as "Authorization:
                                      Bearer <token>" to routers that
                                      require auth (never to in-cluster
                                      pods, never logged) */
    const asb_http_header *extra_headers; /* sent on every router call (at
                                      most 12; not the ones the library
                                      sets: X-Sandbox-*, X-Request-ID,
                                      Authorization (use router_token),
                                      Host, Content-*, Transfer-Encoding,
                                      Connection). Values of 8 bytes or
                                      more may be keys: masked like the
                                      token where an error echoes them */
    size_t extra_header_count;
    int send_pod_ip;               /* default 0. 1: send X-Sandbox-Pod-IP
                                      (looked up once per handle, again
                                      after a 502 or a refused connect); a
                                      401/403 on the lookup turns it off
                                      for good */
    const char *gateway_name;      /* ASB_CONNECT_GATEWAY: the Gateway */
    const char *gateway_namespace; /* default "default" */
    int gateway_ready_timeout_ms;  /* default 180000 */
    int gateway_port;              /* default 80, 443 with gateway_https */
    int gateway_https;             /* default 0: http://<address>:<port>.
                                      1: https://, verified with
                                      sandbox_tls (the address is usually
                                      an IP the Gateway's certificate
                                      does not name: set
                                      sandbox_tls.server_name to the name
                                      it does) */
    asb_tls_config sandbox_tls;    /* how an https router is verified:
                                      direct_url or gateway_https (calls
                                      to in-cluster pods are plain http).
                                      Default: the system CA bundle,
                                      verification on, no client
                                      certificate. Set ca_file / ca_dir /
                                      ca_data for a private CA,
                                      client_cert_* and client_key_* for
                                      mutual TLS, server_name to check a
                                      name other than the URL's host.
                                      Separate from the API server's TLS,
                                      which comes from the kubeconfig.
                                      Read and copied by asb_client_create:
                                      a bad file fails there with
                                      ASB_ERR_TLS_CONFIG, its message
                                      starting "sandbox_tls:". Unused
                                      when built with ASB_TLS 0 */
    asb_logger log;                /* default none. Records from the client,
                                      the tunnel, the Kubernetes layer and
                                      HTTP (used for kube.http.log too,
                                      unless that one is set) */
    asb_tracer_desc tracer;        /* default: off. OpenTelemetry spans,
                                      trace context on requests and claims,
                                      latency histograms; see TRACING */
} asb_client_desc;

typedef struct asb_client asb_client;
typedef struct asb_sandbox asb_sandbox;

/* Makes a client: loads the kubeconfig (or the in-cluster configuration)
   and checks the description; desc NULL or zeroed means every default
   above (current context, local tunnel to the router in
   agent-sandbox-system). Nothing is sent and kubectl is not started
   until a sandbox is created or attached.
   Errors: those of asb_kube_client_create (ASB_ERR_KUBECONFIG for no
   kubeconfig, see TROUBLESHOOTING), ASB_ERR_INVALID_ARGUMENT (a mode
   without its URL or Gateway, a bad port, a reserved extra header),
   ASB_ERR_TLS_CONFIG (sandbox_tls files), ASB_ERR_TLS_UNAVAILABLE (an
   https router under ASB_TLS 0).
   Ownership: desc and its strings are copied; *out is the caller's, free
   it with asb_client_free.
   Threads: see the client's rule in CONVENTIONS; create and free from
   one thread. */
ASB_API asb_result asb_client_create(const asb_client_desc *desc, asb_client **out,
                                     asb_error *err);
/* Stops the tunnel (SIGTERM, then SIGKILL after 2 s; always reaped),
   frees every handle (deleting their claims with cleanup_on_free; without
   it the sandboxes keep running). NULL is harmless.
   Ownership: every asb_sandbox of the client is gone afterwards.
   Threads: only once no call on the client or its handles is running. */
ASB_API void asb_client_free(asb_client *client);

/* One environment variable for a v1beta1 claim (spec.env). */
typedef struct asb_env_var {
    const char *name;           /* asb_env_name_validate's rule (checked) */
    const char *value;          /* default NULL: "" */
    const char *container_name; /* default NULL: the template's containers
                                   as the controller chooses them */
} asb_env_var;

typedef struct asb_create_opts {
    const char *namespace_name;    /* default NULL: asb_client_namespace
                                      (the context's, else "default") */
    int ready_timeout_ms;          /* default 180000 */
    const asb_label *labels;       /* validated before any API call */
    size_t label_count;
    int64_t shutdown_after_seconds; /* default 0: no TTL; else > 0 */
    const char *warmpool;          /* v1alpha1 spec.warmpool policy:
                                      "none", "default" or a pool name;
                                      default NULL: unset */
    const char *warm_pool;         /* v1beta1 (agent-sandbox v0.5+): claim
                                      from this SandboxWarmPool
                                      (spec.warmPoolRef) instead of naming
                                      a template; pass template_name NULL */
    int probe_runtime;             /* default 0: Ready is the controller's
                                      word (the pod's readiness probe has
                                      passed), and through a router (every
                                      mode but in-cluster) GET / is sent
                                      until the router places it: the Go
                                      sandbox-router finds pods in a cache
                                      of its own, which can lag Ready by a
                                      moment under load (a command sent
                                      then meets a 502, and a POST is never
                                      retried); only its 502/503/504 are
                                      waited out, within the ready timeout.
                                      1: also wait, within the ready
                                      timeout, until the runtime answers
                                      GET / with no 5xx: for templates
                                      without a readiness probe */
    const char *claim_name;        /* default NULL: "sandbox-claim-" and 8
                                      random hex digits. Else this name (a
                                      DNS-1123 subdomain, checked first; on
                                      a v1alpha1 cluster, where the sandbox
                                      is named after it, a DNS-1123 label),
                                      and the claim is the caller's:
                                      asb_client_free leaves it alone even
                                      with cleanup_on_free */
    int adopt_existing;            /* default 0: a claim of that name
                                      already there is ASB_ERR_KUBE_API
                                      with http_status 409. 1 (needs
                                      claim_name): attach to it instead,
                                      once it names the same template or
                                      warm pool and is not being deleted;
                                      the options below are not applied
                                      to a claim that was already there,
                                      and a failed wait never deletes it */
    /* v1beta1 only (agent-sandbox v0.5+); refused with
       ASB_ERR_INVALID_ARGUMENT on a v1alpha1 cluster, before any claim: */
    const asb_env_var *env;        /* spec.env: set in the sandbox's
                                      containers. The controller then
                                      starts a fresh sandbox from the pool's
                                      template instead of a warm one, and
                                      fails it (EnvVarsInjectionRejected)
                                      unless the template's
                                      envVarsInjectionPolicy allows it */
    size_t env_count;
    const asb_label *pod_labels;   /* spec.additionalPodMetadata.labels:
                                      on the sandbox's pod (the claim's own
                                      are `labels`); checked as labels */
    size_t pod_label_count;
    const asb_label *pod_annotations; /* ...annotations: on the pod */
    size_t pod_annotation_count;
    const char *const *volume_claim_templates; /* spec.volumeClaimTemplates:
                                      each one JSON object, a
                                      PersistentVolumeClaimTemplate
                                      ({"metadata":{"name":"data"},"spec":
                                      {...}}), checked to be an object and
                                      sent as given; the template's
                                      volumeClaimTemplatesPolicy decides
                                      (VolumeClaimTemplatesError if not) */
    size_t volume_claim_template_count;
    const asb_cancel *cancel;      /* default NULL. Triggered from another
                                      thread while the create waits for
                                      Ready (or probes the runtime): it
                                      returns ASB_ERR_CANCELLED at once, the
                                      claim it made deleted (that delete is
                                      not cancelled). The POST itself is
                                      bounded by the client's timeouts */
} asb_create_opts;

/* Creates a SandboxClaim for `template_name` (v1alpha1) or for
   opts->warm_pool (v1beta1), waits until it is bound and Ready (on the
   client's one shared watch of the namespace, which every concurrent
   create uses: see CONCURRENCY), and returns a handle the client tracks. With the local tunnel, kubectl
   is started as soon as the claim exists, so it comes up while the
   controller works; the first call waits for it if need be.
   TemplateNotFound fails at once (ASB_ERR_TEMPLATE_NOT_FOUND), as do the
   reasons the controllers never retry (ASB_ERR_CLAIM_FAILED with the
   controller's reason and message: InvalidMetadata,
   EnvVarsInjectionRejected, VolumeClaimTemplatesError, ClaimExpired,
   SandboxExpired, InvalidConfiguration, PodFailed, PodSucceeded); the
   deadline is ASB_ERR_TIMEOUT. On any failure the claim this call created
   is deleted before returning (no orphan), pinned to its UID so a claim
   re-created under the same name meanwhile is never touched. The
   claim is named client-side, so a create whose POST went out but whose
   answer was lost (cut connection, timeout, 5xx) deletes it by name too.

   The wait is pinned to the claim's UID too: if the claim is deleted the
   wait fails (ASB_ERR_METADATA), and if another claim of the same name
   appears in its place the wait fails with ASB_ERR_NOT_FOUND ("replaced")
   instead of taking the newcomer for ours. The handle keeps the UID:
   asb_sandbox_terminate deletes with that UID as a precondition.
   Errors: besides those named above, ASB_ERR_WARMPOOL_NOT_FOUND
   (opts->warm_pool names no pool), ASB_ERR_KUBE_API (e.g. a 403 from
   RBAC), ASB_ERR_KUBECTL_MISSING / ASB_ERR_PORT_FORWARD (the tunnel), and
   the transport codes; TROUBLESHOOTING shows the first ones users meet.
   Ownership: *out belongs to the client (freed by asb_client_free); end
   the sandbox with asb_sandbox_terminate. opts NULL: every default.
   Threads: several threads may create sandboxes on one client at once. */
ASB_API asb_result asb_client_create_sandbox(asb_client *client, const char *template_name,
                                             const asb_create_opts *opts, asb_sandbox **out,
                                             asb_error *err);

/* The outcome of one create of a batch (asb_client_create_sandboxes). */
typedef struct asb_create_result {
    asb_sandbox *sandbox; /* the ready handle (the client's, as from
                             asb_client_create_sandbox), NULL on failure */
    asb_error error;      /* why it failed (error.code); error.code is
                             ASB_OK on success */
} asb_create_result;

/* Creates `count` sandboxes from one template (or opts->warm_pool) with
   one set of options, at most max_in_flight of them at a time (0 or
   less: 16; at most 1024, and never more than count), and waits for all.
   Each create is asb_client_create_sandbox with the same guarantees (no
   orphan claim on failure); all of them share the client's one watch of
   the namespace, its connection pools (grown to the batch's width, up
   to 256 kept connections) and its tunnel. results[i] says how create i
   went; the creates run on max_in_flight - 1 threads of their own (512
   KiB of stack each) plus the calling thread, all joined before the
   call returns. opts->claim_name must be NULL (each claim gets its own
   generated name); opts->cancel, when triggered, ends the waits and
   skips the creates not started yet (their result ASB_ERR_CANCELLED).
   Returns ASB_OK when every create succeeded; otherwise the code of the
   first failed one (lowest index) and err->message says how many failed
   and why the first did. The sandboxes that were created are live either
   way: terminate them if you want all or nothing.
   Errors: ASB_ERR_INVALID_ARGUMENT (count 0, NULL results, a claim_name)
   before anything is created; then those of asb_client_create_sandbox.
   Ownership: the handles in results are the client's; results is the
   caller's array of count entries.
   Threads: like asb_client_create_sandbox: other threads may use the
   client meanwhile. */
ASB_API asb_result asb_client_create_sandboxes(asb_client *client, const char *template_name,
                                               const asb_create_opts *opts, size_t count,
                                               int max_in_flight, asb_create_result *results,
                                               asb_error *err);

/* Names of a handle. Cannot fail.
   Ownership: borrowed; they live as long as the handle (until
   asb_client_free). */
ASB_API const char *asb_sandbox_claim_name(const asb_sandbox *sb);
ASB_API const char *asb_sandbox_name(const asb_sandbox *sb);
ASB_API const char *asb_sandbox_namespace(const asb_sandbox *sb);
/* 1 until terminate or close_connection (or client free). */
ASB_API int asb_sandbox_is_active(const asb_sandbox *sb);

/* The result of a command: bytes as the runtime reported them. */
typedef struct asb_run_result {
    asb_buf out;   /* stdout */
    asb_buf err;   /* stderr */
    int exit_code;
} asb_run_result;
/* Frees out and err. Harmless on a result asb_sandbox_run failed to fill,
   and twice. */
ASB_API void asb_run_result_free(asb_run_result *r);

/* DEADLINES AND CANCELLATION, for every call that talks to the runtime
   (run and the file calls; the _opts forms take an asb_call_opts).

   One rule: a call with a deadline waits for its answer until that
   deadline, never less, and never more. The client's wait for each next
   byte (kube.http.read_timeout_ms, 30 s) is raised to the deadline on
   every connection mode (local tunnel, direct, Gateway, in-cluster), so
   a command that prints nothing for minutes is fine; connecting, sending,
   waiting and any pause between retries all fit inside the deadline.
   A call without one (timeout_ms 0 or less) gets the default: 60 s for a
   command (the reference's run(timeout=60)); none for the file calls
   (they may move gigabytes), which wait up to the client's read timeout
   for each next byte. The deadline goes to the router as
   X-Sandbox-Timeout in whole seconds, rounded up.

   A command that outlives its deadline is ASB_ERR_TIMEOUT, its message
   naming the deadline: the command may still be running in the sandbox
   (a runtime ends it at its own exec timeout: 300 s by default).

   Through the upstream Go sandbox-router two of its flags bound a call
   as well: --response-header-timeout (default 30 s) for the runtime's
   response head, and --proxy-timeout (default 180 s) for the whole
   request. agentsandbox-runtime sends its head once a command has run for
   1 s, so only the second applies; the reference python-runtime
   answers only when the command ends, so through that router a command
   past 30 s comes back as a 502, and the error says so.

   Cancellation: give opts.cancel a token (asb_cancel) and trigger it
   from another thread; the call returns ASB_ERR_CANCELLED at once, its
   connection closed, nothing leaked, the handle usable for the next call.
   A cancelled command may still be running in the sandbox. The first
   start of the local tunnel (kubectl port-forward coming up) is not
   cancellable; it is bounded by port_forward_ready_timeout_ms. */
typedef struct asb_call_opts {
    int timeout_ms;           /* the call's deadline; default 0: the
                                 default above (run 60000, files none) */
    const asb_cancel *cancel; /* default NULL: not cancellable */
    const asb_env_var *env;   /* run (sandboxd): more environment for the
                                 command, over sandboxd's own
                                 (container_name unused; names checked
                                 with asb_env_name_validate). Default
                                 none. The legacy runtime has no way to
                                 pass it: ASB_ERR_UNSUPPORTED */
    size_t env_count;
    const char *cwd;          /* run (sandboxd): the working directory,
                                 relative to the sandbox root (outside it:
                                 ASB_ERR_PERMISSION_DENIED). Default NULL:
                                 the root. Legacy: ASB_ERR_UNSUPPORTED */
    unsigned file_mode;       /* write calls (sandboxd): the file's
                                 permission bits, 0 to 0777 (e.g. 0755).
                                 Default 0: sandboxd's own 0644. Legacy:
                                 ASB_ERR_UNSUPPORTED unless 0 */
} asb_call_opts;

/* Runs a command in the sandbox (POST /execute; never retried once it
   reached the runtime). timeout_ms is the deadline (see DEADLINES AND
   CANCELLATION; 0 or less: 60000). A malformed answer is
   ASB_ERR_HTTP_PROTOCOL with the body kept in err->body. On success out
   and err are NUL-terminated (also when empty), so text output prints
   with %s.
   Errors, for this and every call below that talks to the sandbox:
   ASB_ERR_CLOSED (the handle was closed or terminated), the transport
   codes of asb_http_do, ASB_ERR_TIMEOUT past the deadline,
   ASB_ERR_CANCELLED by the call's token, ASB_ERR_HTTP_STATUS when the
   router or runtime refuses (err->http_status, err->body; a command is
   never re-sent), ASB_ERR_TOO_LARGE (output over max_output_bytes), and
   for the local tunnel ASB_ERR_KUBECTL_MISSING or ASB_ERR_PORT_FORWARD.
   Ownership: free *result with asb_run_result_free whatever the result.
   Threads: one handle from one thread at a time; different handles of one
   client from different threads at once (a cancel token may be triggered
   from any thread). */
ASB_API asb_result asb_sandbox_run(asb_sandbox *sb, const char *command, int timeout_ms,
                                   asb_run_result *result, asb_error *err);
/* The same with a deadline and a cancel token; opts NULL: defaults.
   Errors: as asb_sandbox_run (ASB_ERR_TIMEOUT and ASB_ERR_CANCELLED
   among them). */
ASB_API asb_result asb_sandbox_run_opts(asb_sandbox *sb, const char *command,
                                        const asb_call_opts *opts, asb_run_result *result,
                                        asb_error *err);

/* Files, with the safe-path rules of asb_path_normalize applied first.
   write: multipart upload of data[0, len); read: the whole file appended
   to out (capped at max_read_bytes); exists: *exists 0/1 (the runtime
   alone judges that path).
   Errors: those of asb_sandbox_run; ASB_ERR_INVALID_ARGUMENT for an
   unsafe path, before anything is sent; ASB_ERR_HTTP_STATUS with 404
   for a missing file on read.
   Ownership: out is the caller's (asb_buf_free), data is only read. */
ASB_API asb_result asb_sandbox_write(asb_sandbox *sb, const char *path, const void *data,
                                     size_t len, asb_error *err);
ASB_API asb_result asb_sandbox_read(asb_sandbox *sb, const char *path, asb_buf *out,
                                    asb_error *err);
ASB_API asb_result asb_sandbox_exists(asb_sandbox *sb, const char *path, int *exists,
                                      asb_error *err);
/* The same with a deadline and a cancel token (opts NULL: defaults).
   Errors: as the plain calls, ASB_ERR_TIMEOUT and ASB_ERR_CANCELLED too. */
ASB_API asb_result asb_sandbox_write_opts(asb_sandbox *sb, const char *path, const void *data,
                                          size_t len, const asb_call_opts *opts,
                                          asb_error *err);
ASB_API asb_result asb_sandbox_read_opts(asb_sandbox *sb, const char *path, asb_buf *out,
                                         const asb_call_opts *opts, asb_error *err);
ASB_API asb_result asb_sandbox_exists_opts(asb_sandbox *sb, const char *path, int *exists,
                                           const asb_call_opts *opts, asb_error *err);

/* Ends the handle's use of the connection without deleting the claim (the
   sandbox keeps running; asb_client_get_sandbox attaches again). Later
   calls on the handle return ASB_ERR_CLOSED. Idempotent; cannot fail.
   Ownership: the handle stays the client's until asb_client_free. */
ASB_API void asb_sandbox_close_connection(asb_sandbox *sb);

/* Deletes the claim (a missing one is fine) and ends the handle; calls on
   a terminated handle return ASB_ERR_CLOSED. Idempotent. The handle stays
   valid (and owned by the client) until asb_client_free.
   Errors: ASB_ERR_KUBE_API (e.g. RBAC forbids delete), the transport
   codes; on failure the handle stays active, so the call can be
   repeated. */
ASB_API asb_result asb_sandbox_terminate(asb_sandbox *sb, asb_error *err);

/* Attaches to an existing claim once it is bound to a Sandbox that
   exists (waiting up to resolve_timeout_ms, default 30000, for the
   binding). A handle the client already tracks goes through the same
   checks (the claim re-read, its Sandbox looked up): it is returned,
   reopened, when it is still the same claim (UID) and Sandbox; a claim
   that is gone ends it (ASB_ERR_NOT_FOUND); a Sandbox that cannot be
   found closes it (it stays tracked, for cleanup); a claim re-created
   under the same name ends it and a new handle is returned. `ns` NULL
   means asb_client_namespace (the context's, else "default").
   Errors: ASB_ERR_NOT_FOUND (no such claim, or its Sandbox is gone),
   ASB_ERR_TIMEOUT (not bound within resolve_timeout_ms),
   ASB_ERR_METADATA (deleted while resolving), ASB_ERR_KUBE_API.
   Ownership: *out belongs to the client, as from create_sandbox. */
ASB_API asb_result asb_client_get_sandbox(asb_client *client, const char *claim_name,
                                          const char *ns, int resolve_timeout_ms,
                                          asb_sandbox **out, asb_error *err);

/* The client's active handles: fills out[0, cap) and returns how many
   there are (may exceed cap). Cannot fail.
   Ownership: borrowed handles, owned by the client. */
ASB_API size_t asb_client_list_active(asb_client *client, asb_sandbox **out, size_t cap);

/* Names, owned by the list; free with asb_name_list_free. */
typedef struct asb_name_list {
    size_t count;
    char **names;
    asb_allocator alloc_;
} asb_name_list;
/* Frees the names and the array. Harmless on an empty list and twice. */
ASB_API void asb_name_list_free(asb_name_list *list);

/* Every claim in the namespace (NULL: the client's namespace, see
   asb_client_namespace) matching the label selector (NULL: all), across
   pages, tracked by this client or not. Names only; asb_client_list_claims
   gives each claim's details, and every namespace.
   Errors: ASB_ERR_KUBE_API (e.g. RBAC forbids list), the transport codes.
   Ownership: free *out with asb_name_list_free on success. */
ASB_API asb_result asb_client_list_all(asb_client *client, const char *ns,
                                       const char *label_selector, asb_name_list *out,
                                       asb_error *err);

/* The namespace a NULL namespace means in this client's calls (create,
   get, list, delete): the kubeconfig context's `namespace`, as kubectl
   reads it, or the pod's own namespace in-cluster; "default" when the
   context names none. (The Python SDK 1.0.8 always means "default": the
   same unless the context names a namespace. README: Namespaces.)
   Never NULL; lives as long as the client. Cannot fail. */
ASB_API const char *asb_client_namespace(const asb_client *client);

/* The Kubernetes client this client talks through, for the reads and
   writes the sandbox calls do not cover (a claim's full object, events,
   other resources). Borrowed: it lives as long as the client; do not
   free it. Thread safety: as for any asb_kube_client. */
ASB_API asb_kube_client *asb_client_kube(asb_client *client);

/* The SandboxClaim resource this client uses: group
   "extensions.agents.x-k8s.io", plural "sandboxclaims", and the version
   (desc.claim_api_version, or the cluster's preferred one, discovered
   now if no call has needed it yet), ready for asb_kube_get / _list /
   _watch. Errors: those of discovery (ASB_ERR_NOT_FOUND when the cluster
   serves no SandboxClaims, the transport codes).
   Ownership: the strings are the client's, valid until asb_client_free. */
ASB_API asb_result asb_client_claim_resource(asb_client *client, asb_kube_resource *out,
                                             asb_error *err);

/* One claim as listed. Strings are never NULL ("" when absent). */
typedef struct asb_claim_info {
    const char *name;
    const char *namespace_name;
    const char *template_name;  /* spec.sandboxTemplateRef.name; "" for a
                                   v1beta1 claim from a warm pool */
    const char *warm_pool;      /* spec.warmPoolRef.name (v1beta1), else "" */
    const char *sandbox_name;   /* status.sandbox.name once bound, else "" */
    int ready;                  /* 1: the Ready condition is True */
    const char *reason;         /* the Ready condition's reason, "" */
    const char *message;        /* the Ready condition's message, "" */
    int64_t created_unix;       /* metadata.creationTimestamp, seconds since
                                   1970 (age: now minus this); 0 unknown */
} asb_claim_info;

typedef struct asb_claim_list {
    size_t count;
    asb_claim_info *items;
    asb_allocator alloc_;
    void *strings_; /* internal: the bytes the items point into */
} asb_claim_list;

typedef struct asb_claim_list_opts {
    const char *namespace_name; /* default NULL: asb_client_namespace */
    int all_namespaces;         /* default 0. 1: every namespace
                                   (namespace_name is then ignored) */
    const char *label_selector; /* default NULL: all */
} asb_claim_list_opts;

/* Every claim matching opts (NULL: the client's namespace, all labels),
   with its details, across pages, tracked by this client or not; in the
   apiserver's order (by namespace, then name).
   Errors: ASB_ERR_KUBE_API (e.g. RBAC forbids list; across namespaces it
   needs a ClusterRole), ASB_ERR_JSON_INVALID, the transport codes.
   Ownership: free *out with asb_claim_list_free on success; on failure
   it is empty. */
ASB_API asb_result asb_client_list_claims(asb_client *client, const asb_claim_list_opts *opts,
                                          asb_claim_list *out, asb_error *err);
/* Frees the items and their strings. Harmless on an empty list and twice. */
ASB_API void asb_claim_list_free(asb_claim_list *list);

/* Deletes a claim by name and ends its handle, if the client has one
   (`ns` NULL: asb_client_namespace).
   Errors: ASB_ERR_NOT_FOUND when there is no such claim (gone already:
   callers that only want it gone treat it as done), ASB_ERR_KUBE_API,
   the transport codes. */
ASB_API asb_result asb_client_delete_sandbox(asb_client *client, const char *claim_name,
                                             const char *ns, asb_error *err);

/* Terminates every handle whose claim the client still tracks (closed
   ones too: asb_sandbox_close_connection keeps the claim), trying them
   all. Errors: ASB_OK when all went, else the first failure's code with
   how many failed in the message.
   Claims the client does not track are left alone (asb_client_list_all
   finds them). */
ASB_API asb_result asb_client_delete_all(asb_client *client, asb_error *err);

/* Streams size bytes from `read` into a file (multipart upload; memory
   stays flat for any size).
   Errors: those of asb_sandbox_write; ASB_ERR_CANCELLED when `read`
   returns -1, ASB_ERR_INVALID_ARGUMENT when it gives more or fewer than
   size bytes. `read` runs on the calling thread. */
ASB_API asb_result asb_sandbox_write_stream(asb_sandbox *sb, const char *path,
                                            asb_read_fn read, void *user_data, uint64_t size,
                                            asb_error *err);
/* Streams a file's bytes to `write` as they arrive (no size cap).
   Errors: those of asb_sandbox_read, or whatever `write` returned to
   stop it. `write` runs on the calling thread. */
ASB_API asb_result asb_sandbox_read_stream(asb_sandbox *sb, const char *path,
                                           asb_write_fn write, void *user_data,
                                           asb_error *err);
/* The same with a file descriptor. write_from_fd uploads a regular file
   from its current offset to its end (the size goes into Content-Length,
   so a pipe is ASB_ERR_INVALID_ARGUMENT: use write_stream with a known
   size); a file that shrinks meanwhile is an error, never a short file.
   read_to_fd writes every byte to fd (retrying short writes and EINTR);
   on an error, what was written stays there. Neither closes fd.
   Errors: those of the stream calls, ASB_ERR_IO for the descriptor. */
ASB_API asb_result asb_sandbox_write_from_fd(asb_sandbox *sb, const char *path, int fd,
                                             asb_error *err);
ASB_API asb_result asb_sandbox_read_to_fd(asb_sandbox *sb, const char *path, int fd,
                                          asb_error *err);
/* The same four with a deadline and a cancel token (opts NULL: defaults).
   Errors: as the plain calls, ASB_ERR_TIMEOUT and ASB_ERR_CANCELLED too. */
ASB_API asb_result asb_sandbox_write_stream_opts(asb_sandbox *sb, const char *path,
                                                 asb_read_fn read, void *user_data,
                                                 uint64_t size, const asb_call_opts *opts,
                                                 asb_error *err);
ASB_API asb_result asb_sandbox_read_stream_opts(asb_sandbox *sb, const char *path,
                                                asb_write_fn write, void *user_data,
                                                const asb_call_opts *opts, asb_error *err);
ASB_API asb_result asb_sandbox_write_from_fd_opts(asb_sandbox *sb, const char *path, int fd,
                                                  const asb_call_opts *opts, asb_error *err);
ASB_API asb_result asb_sandbox_read_to_fd_opts(asb_sandbox *sb, const char *path, int fd,
                                               const asb_call_opts *opts, asb_error *err);

typedef struct asb_file_entry {
    char *name;
    uint64_t size;
    int is_dir;      /* "directory" vs "file" */
    double mod_time; /* POSIX seconds */
} asb_file_entry;
typedef struct asb_file_list {
    size_t count;
    asb_file_entry *entries;
    asb_allocator alloc_;
} asb_file_list;
/* Frees the entries and their names. Harmless on an empty list and twice. */
ASB_API void asb_file_list_free(asb_file_list *list);
/* The entries of a directory in the sandbox (GET /list).
   Errors: those of asb_sandbox_run; ASB_ERR_HTTP_PROTOCOL for an answer
   that is not a list.
   Ownership: free *out with asb_file_list_free on success. */
ASB_API asb_result asb_sandbox_list(asb_sandbox *sb, const char *path, asb_file_list *out,
                                    asb_error *err);
ASB_API asb_result asb_sandbox_list_opts(asb_sandbox *sb, const char *path, asb_file_list *out,
                                         const asb_call_opts *opts, asb_error *err);

/* -- what only sandboxd can do (see RUNTIMES) --------------------------------
   On the legacy runtime each of these returns ASB_ERR_UNSUPPORTED before
   anything is sent. Errors from sandboxd map to codes: NOT_FOUND (HTTP
   404 or gRPC NOT_FOUND) -> ASB_ERR_NOT_FOUND, PERMISSION_DENIED (403) ->
   ASB_ERR_PERMISSION_DENIED, CONFLICT (409) -> ASB_ERR_CONFLICT,
   INVALID_ARGUMENT (400) -> ASB_ERR_INVALID_ARGUMENT; err->reason holds
   sandboxd's code ("PERMISSION_DENIED") and err->message its message;
   other gRPC statuses are ASB_ERR_GRPC_STATUS. */

/* The name of the handle's runtime: "legacy" or "sandboxd" (with
   ASB_RUNTIME_AUTO, what the template asked for). Cannot fail.
   Ownership: static storage. */
ASB_API const char *asb_sandbox_runtime(const asb_sandbox *sb);

/* The sandbox this program runs beside (ASB_CONNECT_IN_POD): a handle on
   sandboxd at the client's sandboxd_rest_addr / _grpc_addr, with no claim
   (asb_sandbox_terminate only ends the handle; its name is "in-pod").
   Each call returns the same handle.
   Errors: ASB_ERR_INVALID_ARGUMENT (another connection mode, or no
   address: neither the description nor SANDBOXD_REST_ADDR /
   SANDBOXD_GRPC_ADDR gives one, or one that is not host:port).
   Ownership: *out belongs to the client, as from create_sandbox. */
ASB_API asb_result asb_client_sandbox_in_pod(asb_client *client, asb_sandbox **out,
                                             asb_error *err);

/* What HEAD says about a path (no body moves). */
typedef struct asb_file_stat {
    int exists;      /* 0: nothing there (not an error) */
    int is_dir;
    uint64_t size;   /* a file's bytes (0 for a directory) */
    double mod_time; /* POSIX seconds, from Last-Modified; 0: not given */
} asb_file_stat;
/* Stats a path relative to the sandbox root (HEAD /v1/files/<path>).
   A missing path is *out with exists 0 and ASB_OK.
   Errors: ASB_ERR_PERMISSION_DENIED (outside the root), the transport
   codes, ASB_ERR_UNSUPPORTED (legacy). opts NULL: defaults. */
ASB_API asb_result asb_sandbox_stat(asb_sandbox *sb, const char *path, asb_file_stat *out,
                                    const asb_call_opts *opts, asb_error *err);
/* Removes a file, or a directory with recursive 1 (all it holds too).
   A non-empty directory without recursive is ASB_ERR_CONFLICT and
   nothing is removed; a missing path is ASB_ERR_NOT_FOUND; the root
   itself is refused (ASB_ERR_INVALID_ARGUMENT) before anything is sent.
   Errors: those, ASB_ERR_PERMISSION_DENIED, ASB_ERR_UNSUPPORTED (legacy). */
ASB_API asb_result asb_sandbox_delete_file(asb_sandbox *sb, const char *path, int recursive,
                                           const asb_call_opts *opts, asb_error *err);
/* sandboxd's GET /v1/metadata: the JSON object {"env": {...}} of the
   non-secret SANDBOX_* variables the orchestrator set, appended to *out
   as received (parse it with asb_json_doc_parse).
   Errors: the transport codes, ASB_ERR_UNSUPPORTED (legacy).
   Ownership: out is the caller's (asb_buf_free). */
ASB_API asb_result asb_sandbox_metadata(asb_sandbox *sb, asb_buf *out,
                                        const asb_call_opts *opts, asb_error *err);

/* -- streaming processes (sandboxd) -----------------------------------------------
   A process started in the sandbox whose output arrives as it is made,
   with stdin, signals and a terminal size: the C face of sandboxd's
   Start/WriteStdin/SendSignal/ResizeTTY.

       static void show(void *u, asb_process_output which, const char *p,
                        size_t n) {
           fwrite(p, 1, n, which == ASB_PROCESS_STDERR ? stderr : stdout);
       }
       ...
       asb_process_opts po;
       asb_process *p;
       int code;
       memset(&po, 0, sizeof po);
       po.shell = "while read l; do echo \"got $l\"; done";
       po.on_output = show;
       if (asb_sandbox_process_start(sb, &po, &p, &err) == ASB_OK) {
           asb_process_write_stdin(p, "a\nb\n", 4, &err);
           asb_process_close_stdin(p, &err);
           asb_process_wait(p, 0, &code, &err); // output arrives here
           asb_process_free(p);
       }

   Threads: asb_process_wait delivers the output on its thread, one wait
   at a time; write_stdin, close_stdin, signal and resize may be called
   from any other thread meanwhile (one thread reading while another
   types is the point). */

typedef struct asb_process asb_process;

typedef enum asb_process_output {
    ASB_PROCESS_STDOUT = 1, /* with a PTY, everything the terminal shows */
    ASB_PROCESS_STDERR = 2
} asb_process_output;

/* One chunk of output as sandboxd sent it (chunks of a stream arrive in
   order and complete; a line may be split across chunks). `data` is
   borrowed until the return. */
typedef void (*asb_process_output_fn)(void *user_data, asb_process_output which,
                                      const char *data, size_t len);

typedef struct asb_process_opts {
    const char *const *argv;  /* the program and its arguments, argc of
                                 them (no shell; argv[0] is looked up on
                                 sandboxd's PATH); or NULL with `shell` */
    size_t argc;
    const char *shell;        /* a command line, run as /bin/sh -c <shell>.
                                 Exactly one of argv and shell */
    const asb_env_var *env;   /* more environment, over sandboxd's own
                                 (container_name unused); default none */
    size_t env_count;
    const char *cwd;          /* relative to the sandbox root; default
                                 NULL: the root. Outside it:
                                 ASB_ERR_PERMISSION_DENIED */
    int pty;                  /* default 0: pipes for stdin, stdout,
                                 stderr. 1: a pseudo-terminal (stdout and
                                 stderr arrive merged as STDOUT; the
                                 program sees a terminal, e.g. for a
                                 shell's prompt) */
    unsigned pty_rows;        /* with pty: the size; default 24 x 80 */
    unsigned pty_cols;
    asb_process_output_fn on_output; /* default NULL: output dropped */
    void *user_data;
    int timeout_ms;           /* default 0: none. Else a deadline for the
                                 whole process, from the start: past it
                                 the stream is cancelled (sandboxd then
                                 kills the process) and wait returns
                                 ASB_ERR_TIMEOUT */
    const asb_cancel *cancel; /* default NULL. Triggered: as the deadline,
                                 with ASB_ERR_CANCELLED */
} asb_process_opts;

/* Starts a process and returns once sandboxd has started it (its init
   event came); output that came with it is delivered from this call.
   Errors: ASB_ERR_INVALID_ARGUMENT (neither or both of argv and shell, an
   empty argv, a bad env name), ASB_ERR_NOT_FOUND (no such program),
   ASB_ERR_PERMISSION_DENIED (cwd outside the root), the transport codes,
   ASB_ERR_UNSUPPORTED (legacy runtime).
   Ownership: *out is the caller's; free it with asb_process_free (also
   after the process ended). The handle must outlive it. */
ASB_API asb_result asb_sandbox_process_start(asb_sandbox *sb, const asb_process_opts *opts,
                                             asb_process **out, asb_error *err);
/* sandboxd's id of the process (for logs). Cannot fail. */
ASB_API int asb_process_id(const asb_process *p);
/* Sends bytes to the process's stdin (the terminal's input with a PTY),
   in order with other writes. Any thread.
   Errors: ASB_ERR_NOT_FOUND (the process has ended), ASB_ERR_CLOSED
   (stdin was closed), the transport codes. */
ASB_API asb_result asb_process_write_stdin(asb_process *p, const void *data, size_t len,
                                           asb_error *err);
/* Closes stdin (EOF); idempotent. Any thread. Errors: as write_stdin. */
ASB_API asb_result asb_process_close_stdin(asb_process *p, asb_error *err);
/* Delivers SIGINT, SIGTERM or SIGKILL (the <signal.h> numbers) to the
   process's group. Any thread.
   Errors: ASB_ERR_INVALID_ARGUMENT (another signal), ASB_ERR_NOT_FOUND
   (it has ended), the transport codes. */
ASB_API asb_result asb_process_signal(asb_process *p, int sig, asb_error *err);
/* Resizes the PTY (the program gets SIGWINCH). Any thread.
   Errors: ASB_ERR_INVALID_ARGUMENT (0 rows or cols), ASB_ERR_GRPC_STATUS
   with reason FAILED_PRECONDITION (no PTY), ASB_ERR_NOT_FOUND (ended). */
ASB_API asb_result asb_process_resize(asb_process *p, unsigned rows, unsigned cols,
                                      asb_error *err);
/* Delivers output to on_output until the process exits, then sets
   *exit_code (its exit status 0-255, or -1 when a signal ended it:
   sandboxd reports no signal number) and returns ASB_OK.
   timeout_ms > 0 waits at most that long: ASB_ERR_TIMEOUT when it still
   runs (call again; nothing is lost). After the exit, returns the same
   code again at once.
   Errors: ASB_ERR_TIMEOUT, opts' deadline or cancel (ASB_ERR_TIMEOUT,
   ASB_ERR_CANCELLED: the process is ended), the transport codes (the
   stream broke: the process may still run). */
ASB_API asb_result asb_process_wait(asb_process *p, int timeout_ms, int *exit_code,
                                    asb_error *err);
/* Ends the stream if the process still runs (sandboxd then kills it) and
   frees. NULL is harmless. Only when no other call on p is running. */
ASB_API void asb_process_free(asb_process *p);

/* The pod behind a handle (the Sandbox's agents.x-k8s.io/pod-name
   annotation, else the sandbox name) and the selector's name hash
   ("" when the Sandbox reported none). Cannot fail.
   Ownership: borrowed; they live as long as the handle. */
ASB_API const char *asb_sandbox_pod_name(const asb_sandbox *sb);
ASB_API const char *asb_sandbox_name_hash(const asb_sandbox *sb);

typedef enum asb_sandbox_state {
    ASB_SANDBOX_READY = 1,
    ASB_SANDBOX_NOT_READY,
    ASB_SANDBOX_NOT_FOUND
} asb_sandbox_state;

/* The Sandbox's Ready condition now: ready, not ready (with the
   condition's message in msg) or not found. A Sandbox with no Ready
   condition yet is not ready with msg "Unknown message", as the Python
   SDK reports it. msg (msg_cap bytes, may be NULL) is NUL-terminated,
   cut to fit. A missing Sandbox is a state, not an error.
   Errors: ASB_ERR_KUBE_API, the transport codes. */
ASB_API asb_result asb_sandbox_status(asb_sandbox *sb, asb_sandbox_state *state, char *msg,
                                      size_t msg_cap, asb_error *err);

/* The pod's IP from the Sandbox's status.podIPs, looked up now (this
   call never caches; the handle's calls keep the last one they used):
   IPv4 preferred, an IPv4-mapped IPv6 address counts as IPv4 (unmapped),
   invalid entries skipped. ASB_ERR_NOT_FOUND when there is none (the
   pod is not scheduled yet, or the Sandbox is gone).
   Errors: ASB_ERR_NOT_FOUND, ASB_ERR_KUBE_API, the transport codes. */
#define ASB_IP_SIZE 64
ASB_API asb_result asb_sandbox_pod_ip(asb_sandbox *sb, char out[ASB_IP_SIZE], asb_error *err);

/* Tracing: the calls that need a client or a handle (types above the
   sandbox declarations). */
/* Reads one histogram series (failed 0: the successes, 1: the failures)
   since the client was made.
   Errors: ASB_ERR_INVALID_ARGUMENT also when the client traces nothing
   (asb_tracer_desc.enable 0, or OTEL_SDK_DISABLED=true).
   Threads: any thread, while calls run. */
ASB_API asb_result asb_client_latency(asb_client *client, asb_latency_kind kind, int failed,
                                      asb_latency_stats *out, asb_error *err);
/* The handle's lifecycle span as a traceparent value, for a program that
   links its own spans to ours; "" when the client does not trace. Cannot
   fail. */
ASB_API void asb_sandbox_traceparent(const asb_sandbox *sb, char out[ASB_TRACEPARENT_SIZE]);

/* ==========================================================================
   TLS backend
   ========================================================================== */

/* "mbed TLS 2.28.3" (the linked library's own version) or "none" when built
   with ASB_TLS 0. Cannot fail.
   Ownership: static storage, never freed. */
ASB_API const char *asb_tls_backend(void);

#ifdef __cplusplus
}
#endif

#endif /* AGENTSANDBOX_H */

/* ==========================================================================
   ==========================================================================
   IMPLEMENTATION
   ==========================================================================
   ========================================================================== */

#ifdef AGENTSANDBOX_IMPLEMENTATION
#ifndef ASB__IMPLEMENTATION_DONE
#define ASB__IMPLEMENTATION_DONE

/* >>platform ================================================================
   Everything the library asks of the OS, in one place. POSIX only for now. */

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <limits.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <sys/select.h>
#include <sys/resource.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif

#if ASB_TLS
#ifndef ASB_PSA_EXTERNAL_RNG
#define ASB_PSA_EXTERNAL_RNG 1
#endif
#include <mbedtls/version.h>
#include <mbedtls/ctr_drbg.h>
#include <mbedtls/error.h>
#include <mbedtls/net_sockets.h> /* only for its MBEDTLS_ERR_NET_* codes */
#include <mbedtls/pk.h>
#include <mbedtls/platform_util.h>
#include <mbedtls/ssl.h>
#include <mbedtls/x509_crt.h>
#if MBEDTLS_VERSION_NUMBER >= 0x03000000
#include <psa/crypto.h>
#endif
#endif

#if defined(__GNUC__) || defined(__clang__)
#define ASB__PRINTF(f, a) __attribute__((format(printf, f, a)))
#define ASB__LIKELY(x) __builtin_expect(!!(x), 1)
#define ASB__UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define ASB__PRINTF(f, a)
#define ASB__LIKELY(x) (x)
#define ASB__UNLIKELY(x) (x)
#endif

static void *asb__libc_alloc(size_t size, void *user_data) {
    (void)user_data;
    return malloc(size ? size : 1);
}
static void *asb__libc_realloc(void *ptr, size_t size, void *user_data) {
    (void)user_data;
    return realloc(ptr, size ? size : 1);
}
static void asb__libc_free(void *ptr, void *user_data) {
    (void)user_data;
    free(ptr);
}

/* Overwrites n bytes at p with zeros in a way the compiler may not drop as
   a dead store before free (a plain memset can be, and is, removed). */
static void asb__wipe(void *p, size_t n) {
    if (!p || !n) return;
#if ASB_TLS
    mbedtls_platform_zeroize(p, n);
#else
    {
        volatile unsigned char *v = (volatile unsigned char *)p;
        while (n--) *v++ = 0;
    }
#endif
}

/* Wipes then frees a block that held a secret; n is what was written. */
static void asb__free_secret(const asb_allocator *a, void *p, size_t n) {
    if (!p) return;
    asb__wipe(p, n);
    a->free_fn(p, a->user_data);
}

/* Resolves a caller's allocator: NULL or all-NULL means libc; a partial one
   is refused rather than silently mixing two heaps. */
static asb_result asb__allocator_resolve(const asb_allocator *in,
                                         asb_allocator *out) {
    if (!in || (!in->alloc_fn && !in->realloc_fn && !in->free_fn)) {
        out->alloc_fn = asb__libc_alloc;
        out->realloc_fn = asb__libc_realloc;
        out->free_fn = asb__libc_free;
        out->user_data = NULL;
        return ASB_OK;
    }
    if (!in->alloc_fn || !in->realloc_fn || !in->free_fn)
        return ASB_ERR_INVALID_ARGUMENT;
    *out = *in;
    return ASB_OK;
}

/* Fills buf with bytes from the kernel's CSPRNG: the getrandom system call
   (Linux, no file needed: a static binary in an empty root has no /dev),
   else /dev/urandom. Never falls back to a weaker source: claim names must
   not collide across processes, and TLS keys are drawn from it. On
   failure, why (if not NULL) names each source and its errno. */
static asb_result asb__random_bytes_why(void *buf, size_t len, char *why, size_t cap) {
    unsigned char *p = (unsigned char *)buf;
    int gr_err = ENOSYS, fd;
#if defined(__linux__) && defined(SYS_getrandom)
    while (len > 0) {
        long n = syscall(SYS_getrandom, p, len, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            gr_err = errno;
            break; /* ENOSYS on old kernels, EPERM under seccomp: the device */
        }
        p += n;
        len -= (size_t)n;
    }
    if (len == 0) return ASB_OK;
#endif
    fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    while (fd >= 0 && len > 0) {
        ssize_t n = read(fd, p, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        p += n;
        len -= (size_t)n;
    }
    if (len > 0 && why)
        snprintf(why, cap, "no random source: getrandom failed (%s) and /dev/urandom: %s",
                 strerror(gr_err), fd < 0 ? strerror(errno) : "gave no bytes");
    if (fd >= 0) close(fd);
    return len == 0 ? ASB_OK : ASB_ERR_IO;
}

static asb_result asb__random_bytes(void *buf, size_t len) {
    return asb__random_bytes_why(buf, len, NULL, 0);
}

/* Identifiers that must differ but are no secret (X-Request-ID, trace and
   span ids): the CSPRNG's bytes, else, with no random source at all (see
   above), bytes mixed from the clocks, the pid and the buffer's address
   (other threads use other stacks). Never what the buffer held: old stack
   bytes would go out in a header, and a zeroed id that must not be zero
   would be drawn again forever. */
static void asb__id_bytes(void *buf, size_t len) {
    unsigned char *p = (unsigned char *)buf;
    struct timespec rt, mt;
    uint64_t x;
    size_t i;
    if (asb__random_bytes(buf, len) == ASB_OK) return;
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mt);
    x = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
    x ^= ((uint64_t)mt.tv_sec * 1000000000u + (uint64_t)mt.tv_nsec) * 0x9e3779b97f4a7c15u;
    x ^= (uint64_t)getpid() << 40 ^ (uint64_t)(uintptr_t)buf;
    for (i = 0; i < len; i++) {
        uint64_t z;
        if (i % 8 == 0) x += 0x9e3779b97f4a7c15u; /* splitmix64 */
        z = x;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
        z ^= z >> 31;
        p[i] = (unsigned char)(z >> (8 * (i % 8)));
    }
}

/* Descriptors are born close-on-exec: a program's other thread may
   fork and exec at any moment, and a pipe's write end inherited by an
   unrelated child keeps the reader from ever seeing EOF (the exec plugin
   would wait for that child to exit). pipe2 and SOCK_CLOEXEC where the
   platform has them; elsewhere the flag follows at once, with a window a
   concurrent fork can still hit. */
static int asb__pipe_cloexec(int fds[2]) {
#if defined(__linux__) && defined(SYS_pipe2)
    /* the system call: glibc declares pipe2 only under _GNU_SOURCE */
    if (syscall(SYS_pipe2, fds, O_CLOEXEC) == 0) return 0;
    if (errno != ENOSYS) return -1;
#endif
    if (pipe(fds) < 0) return -1;
    (void)fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    (void)fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    return 0;
}

static int asb__socket_cloexec(int domain, int type, int protocol) {
    int fd;
#if defined(SOCK_CLOEXEC)
    fd = socket(domain, type | SOCK_CLOEXEC, protocol);
    if (fd >= 0 || errno != EINVAL) return fd; /* EINVAL: a kernel without it */
#endif
    fd = socket(domain, type, protocol);
    if (fd >= 0) (void)fcntl(fd, F_SETFD, FD_CLOEXEC);
    return fd;
}

/* A pause of ms/2 + random(0, ms/2]: retries of many clients spread out
   instead of arriving together. ms up to INT_MAX/2. */
static int asb__jitter_ms(int ms) {
    unsigned char rb[2];
    if (ms < 2 || asb__random_bytes(rb, 2) != ASB_OK) return ms;
    return ms / 2 + (int)((uint64_t)(ms / 2) * (uint64_t)(rb[0] << 8 | rb[1]) / 65535u);
}

/* An executable found as kubectl finds one (Go's exec.LookPath): a
   command with a '/' is a path; a bare name is looked up in the absolute
   directories of PATH only. Never in the current directory: not first,
   as execvp-style code once tried it, and not through an empty or
   relative PATH entry (execvp takes one as the current directory; Go
   refuses that result as ErrDot), so a file planted where the program
   runs is never executed in place of the exec plugin or kubectl. Called
   before fork, so the child only execs. 0 or an errno. */
static int asb__find_executable(const char *cmd, char *out, size_t cap) {
    const char *pth = getenv("PATH");
    size_t cl = strlen(cmd);
    int found_other = 0;
    if (cl == 0) return ENOENT;
    if (strchr(cmd, '/')) {
        if (cl >= cap) return ENAMETOOLONG;
        memcpy(out, cmd, cl + 1);
        return 0;
    }
    if (!pth) pth = "/usr/local/bin:/usr/bin:/bin"; /* unset: execvp's default */
    while (*pth) {
        const char *c = strchr(pth, ':');
        size_t dl = c ? (size_t)(c - pth) : strlen(pth);
        if (dl > 0 && pth[0] == '/' && dl + 1 + cl < cap) {
            struct stat st;
            memcpy(out, pth, dl);
            out[dl] = '/';
            memcpy(out + dl + 1, cmd, cl + 1);
            if (stat(out, &st) == 0 && S_ISREG(st.st_mode)) {
                if (access(out, X_OK) == 0) return 0;
                found_other = 1; /* not executable: go on, as Go does */
            }
        }
        pth += dl;
        if (*pth == ':') pth++;
    }
    out[0] = '\0';
    return found_other ? EACCES : ENOENT;
}

/* >>bytes ===================================================================
   Results, error detail, growable buffers. */

ASB_API const char *asb_result_str(asb_result code) {
    switch (code) {
    case ASB_OK: return "ASB_OK";
    case ASB_ERR_INVALID_ARGUMENT: return "ASB_ERR_INVALID_ARGUMENT";
    case ASB_ERR_OUT_OF_MEMORY: return "ASB_ERR_OUT_OF_MEMORY";
    case ASB_ERR_TOO_LARGE: return "ASB_ERR_TOO_LARGE";
    case ASB_ERR_TIMEOUT: return "ASB_ERR_TIMEOUT";
    case ASB_ERR_CANCELLED: return "ASB_ERR_CANCELLED";
    case ASB_ERR_IO: return "ASB_ERR_IO";
    case ASB_ERR_CLOSED: return "ASB_ERR_CLOSED";
    case ASB_ERR_DNS: return "ASB_ERR_DNS";
    case ASB_ERR_CONNECT: return "ASB_ERR_CONNECT";
    case ASB_ERR_SEND: return "ASB_ERR_SEND";
    case ASB_ERR_RECV: return "ASB_ERR_RECV";
    case ASB_ERR_PROXY: return "ASB_ERR_PROXY";
    case ASB_ERR_TLS_UNAVAILABLE: return "ASB_ERR_TLS_UNAVAILABLE";
    case ASB_ERR_TLS_CONFIG: return "ASB_ERR_TLS_CONFIG";
    case ASB_ERR_TLS_HANDSHAKE: return "ASB_ERR_TLS_HANDSHAKE";
    case ASB_ERR_TLS_VERIFY: return "ASB_ERR_TLS_VERIFY";
    case ASB_ERR_HTTP_PROTOCOL: return "ASB_ERR_HTTP_PROTOCOL";
    case ASB_ERR_HTTP_STATUS: return "ASB_ERR_HTTP_STATUS";
    case ASB_ERR_HTTP_REDIRECT: return "ASB_ERR_HTTP_REDIRECT";
    case ASB_ERR_HTTP_SHORT_BODY: return "ASB_ERR_HTTP_SHORT_BODY";
    case ASB_ERR_JSON_INVALID: return "ASB_ERR_JSON_INVALID";
    case ASB_ERR_JSON_TYPE: return "ASB_ERR_JSON_TYPE";
    case ASB_ERR_JSON_RANGE: return "ASB_ERR_JSON_RANGE";
    case ASB_ERR_JSON_NOT_FOUND: return "ASB_ERR_JSON_NOT_FOUND";
    case ASB_ERR_KUBECONFIG: return "ASB_ERR_KUBECONFIG";
    case ASB_ERR_CREDENTIALS: return "ASB_ERR_CREDENTIALS";
    case ASB_ERR_NOT_FOUND: return "ASB_ERR_NOT_FOUND";
    case ASB_ERR_KUBE_API: return "ASB_ERR_KUBE_API";
    case ASB_ERR_PORT_FORWARD: return "ASB_ERR_PORT_FORWARD";
    case ASB_ERR_KUBECTL_MISSING: return "ASB_ERR_KUBECTL_MISSING";
    case ASB_ERR_WEBSOCKET: return "ASB_ERR_WEBSOCKET";
    case ASB_ERR_TEMPLATE_NOT_FOUND: return "ASB_ERR_TEMPLATE_NOT_FOUND";
    case ASB_ERR_WARMPOOL_NOT_FOUND: return "ASB_ERR_WARMPOOL_NOT_FOUND";
    case ASB_ERR_CLAIM_FAILED: return "ASB_ERR_CLAIM_FAILED";
    case ASB_ERR_METADATA: return "ASB_ERR_METADATA";
    case ASB_ERR_PERMISSION_DENIED: return "ASB_ERR_PERMISSION_DENIED";
    case ASB_ERR_CONFLICT: return "ASB_ERR_CONFLICT";
    case ASB_ERR_UNSUPPORTED: return "ASB_ERR_UNSUPPORTED";
    case ASB_ERR_GRPC_STATUS: return "ASB_ERR_GRPC_STATUS";
    case ASB_ERR_PROTOBUF_INVALID: return "ASB_ERR_PROTOBUF_INVALID";
    }
    return "ASB_ERR_UNKNOWN";
}

/* Records a failure in an optional asb_error and returns the code, so call
   sites read `return asb__fail(err, CODE, "...", ...)`. */
static asb_result asb__fail(asb_error *err, asb_result code, const char *fmt,
                            ...) ASB__PRINTF(3, 4);
static asb_result asb__fail(asb_error *err, asb_result code, const char *fmt,
                            ...) {
    if (err) {
        va_list ap;
        memset(err, 0, sizeof *err);
        err->code = code;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* Sends one record to the logger, if there is one and the level passes.
   Formatting happens only then: logging off costs one branch. */
static void asb__log(const asb_logger *lg, asb_log_level level, const char *id,
                     const char *fmt, ...) ASB__PRINTF(4, 5);
static void asb__log(const asb_logger *lg, asb_log_level level, const char *id,
                     const char *fmt, ...) {
    char msg[ASB_ERROR_MESSAGE_SIZE];
    asb_log_record rec;
    va_list ap;
    if (!lg || !lg->fn || level < lg->min_level) return;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rec.level = level;
    rec.id = id;
    rec.message = msg;
    lg->fn(lg->user_data, &rec);
}

/* Quotes untrusted bytes for an error message: printable ASCII kept, the
   rest as \xNN, cut at `max` input bytes with "..." so a message stays
   readable and bounded whatever it quotes. */
static void asb__quote(char *out, size_t cap, const char *s, size_t len,
                       size_t max) {
    static const char hex[] = "0123456789abcdef";
    size_t o = 0, i;
    if (cap == 0) return;
    for (i = 0; i < len && i < max; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            if (o + 2 > cap) break;
            out[o++] = (char)c;
        } else {
            if (o + 5 > cap) break;
            out[o++] = '\\';
            out[o++] = 'x';
            out[o++] = hex[c >> 4];
            out[o++] = hex[c & 15];
        }
    }
    if (i < len && o + 4 <= cap) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = '\0';
}

/* Overwrites every copy of `secret` in buf[0, len) with '*'. */
static void asb__mask(char *buf, size_t len, const char *secret) {
    size_t n = strlen(secret), i;
    if (n < 4) return; /* too short to tell from ordinary text */
    for (i = 0; i + n <= len; i++)
        if (memcmp(buf + i, secret, n) == 0) {
            memset(buf + i, '*', n);
            i += n - 1;
        }
    /* the bounded copy may end inside a copy of it: mask that start too */
    for (i = len > n ? len - n + 1 : 0; i + 4 <= len; i++)
        if (memcmp(buf + i, secret, len - i) == 0) {
            memset(buf + i, '*', len - i);
            break;
        }
}

/* Masks `secret` in an error's message and body: a peer that echoes the
   request's headers into its answer must not hand a credential we sent to
   whoever reads the error. One helper for every layer that sends one. */
static void asb__mask_error(asb_error *err, const char *secret) {
    if (!err || !secret) return;
    asb__mask(err->body, err->body_len, secret);
    asb__mask(err->message, strlen(err->message), secret);
}

ASB_API asb_result asb_buf_init(asb_buf *buf, const asb_allocator *alloc) {
    memset(buf, 0, sizeof *buf);
    return asb__allocator_resolve(alloc, &buf->alloc);
}

ASB_API asb_result asb_buf_reserve(asb_buf *buf, size_t extra) {
    size_t need, cap;
    char *p;
    if (!buf->alloc.realloc_fn) {
        /* a zeroed asb_buf that skipped asb_buf_init: treat as libc */
        asb__allocator_resolve(NULL, &buf->alloc);
    }
    if (extra > SIZE_MAX - buf->len - 1) return ASB_ERR_OUT_OF_MEMORY;
    need = buf->len + extra + 1; /* room for the terminating NUL */
    if (need <= buf->cap) return ASB_OK;
    cap = buf->cap ? buf->cap : 64;
    while (cap < need) cap = cap > SIZE_MAX / 2 ? need : cap * 2;
    if (buf->wipe) {
        /* a secret: realloc_fn could move it and free the old copy as it
           is; copy, wipe and free the old block ourselves */
        p = (char *)buf->alloc.alloc_fn(cap, buf->alloc.user_data);
        if (!p) return ASB_ERR_OUT_OF_MEMORY;
        if (buf->ptr) {
            memcpy(p, buf->ptr, buf->len);
            asb__free_secret(&buf->alloc, buf->ptr, buf->cap);
        }
    } else {
        p = (char *)buf->alloc.realloc_fn(buf->ptr, cap, buf->alloc.user_data);
        if (!p) return ASB_ERR_OUT_OF_MEMORY;
    }
    buf->ptr = p;
    buf->cap = cap;
    return ASB_OK;
}

ASB_API asb_result asb_buf_append(asb_buf *buf, const void *data, size_t len) {
    asb_result r = asb_buf_reserve(buf, len);
    if (r != ASB_OK) return r;
    if (len) memcpy(buf->ptr + buf->len, data, len);
    buf->len += len;
    buf->ptr[buf->len] = '\0';
    return ASB_OK;
}

ASB_API void asb_buf_free(asb_buf *buf) {
    if (buf->ptr && buf->wipe) asb__wipe(buf->ptr, buf->cap);
    if (buf->ptr && buf->alloc.free_fn)
        buf->alloc.free_fn(buf->ptr, buf->alloc.user_data);
    buf->ptr = NULL;
    buf->len = 0;
    buf->cap = 0;
}

/* >>json ====================================================================
   Tokenizer (jsmn's model, strict, linear), documents, lookup, getters and
   the writer. */

/* What the tokenizer accepts next. The grammar of RFC 8259 is small enough
   that these six states plus a stack of container kinds check all of it. */
enum {
    ASB__JS_VALUE = 0,      /* a value (top level, after ':' or ',' in []) */
    ASB__JS_VALUE_OR_CLOSE, /* right after '[' */
    ASB__JS_KEY,            /* after ',' in {} */
    ASB__JS_KEY_OR_CLOSE,   /* right after '{' */
    ASB__JS_COLON,          /* after a key */
    ASB__JS_AFTER,          /* after a member or element: ',' or close */
    ASB__JS_DONE            /* the top-level value is complete */
};

/* Byte classes inside a string: 0 plain, 1 quote, 2 backslash, 3 control
   character (forbidden), 4 first byte of a multi-byte UTF-8 sequence. A
   table keeps the common case (plain ASCII) to one load and compare. */
static const unsigned char asb__json_str_class[256] = {
    3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,3,
    0,0,1,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,2,0,0,0,
    0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,
    4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,
    4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,
    4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,
    4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,4,
};

/* Length of the valid UTF-8 sequence at s[0, n), 0 if it is invalid, or -1
   if it is a valid prefix cut short by the end of the text. Follows the
   Unicode well-formed table: no overlongs, no surrogates, nothing past
   U+10FFFF. */
static int asb__utf8_seq(const unsigned char *s, size_t n) {
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    int len, k;
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) {
        len = 3;
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
    } else
        return 0;
    for (k = 1; k < len; k++) {
        if ((size_t)k >= n) return -1;
        if (s[k] < lo || s[k] > hi) return 0;
        lo = 0x80;
        hi = 0xBF;
    }
    return len;
}

static int asb__hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Scans a string body starting after its opening quote. On success *endq is
   the offset of the closing quote. */
static int asb__json_scan_string(const unsigned char *s, unsigned int n,
                                 unsigned int i, unsigned int *endq) {
    for (;;) {
        while (i < n && asb__json_str_class[s[i]] == 0) i++;
        if (i >= n) return ASB_JSON_ERROR_PART;
        switch (asb__json_str_class[s[i]]) {
        case 1:
            *endq = i;
            return 0;
        case 2: {
            unsigned char e;
            if (i + 1 >= n) return ASB_JSON_ERROR_PART;
            e = s[i + 1];
            if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' ||
                e == 'n' || e == 'r' || e == 't') {
                i += 2;
            } else if (e == 'u') {
                unsigned int k;
                for (k = 0; k < 4; k++) {
                    if (i + 2 + k >= n) return ASB_JSON_ERROR_PART;
                    if (asb__hexval(s[i + 2 + k]) < 0)
                        return ASB_JSON_ERROR_INVAL;
                }
                i += 6;
            } else {
                return ASB_JSON_ERROR_INVAL;
            }
            break;
        }
        case 3:
            return ASB_JSON_ERROR_INVAL;
        default: {
            int l = asb__utf8_seq(s + i, n - i);
            if (l < 0) return ASB_JSON_ERROR_PART;
            if (l == 0) return ASB_JSON_ERROR_INVAL;
            i += (unsigned int)l;
            break;
        }
        }
    }
}

static int asb__json_is_delim(unsigned char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == ',' ||
           c == ']' || c == '}';
}

/* Scans a number or literal at s[i]. The end of the text completes a
   top-level value (nothing else could follow) but only suspends one inside
   a container, so resuming with more text never splits a number. */
static int asb__json_scan_primitive(const unsigned char *s, unsigned int n,
                                    unsigned int i, unsigned int *end,
                                    int top_level) {
    unsigned char c = s[i];
    if (c == 't' || c == 'f' || c == 'n') {
        const char *lit = c == 't' ? "true" : c == 'f' ? "false" : "null";
        unsigned int k;
        for (k = 0; lit[k]; k++) {
            if (i + k >= n) return ASB_JSON_ERROR_PART;
            if (s[i + k] != (unsigned char)lit[k]) return ASB_JSON_ERROR_INVAL;
        }
        i += k;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        if (c == '-') {
            if (++i >= n) return ASB_JSON_ERROR_PART;
        }
        if (s[i] == '0') {
            i++;
        } else if (s[i] >= '1' && s[i] <= '9') {
            while (++i < n && s[i] >= '0' && s[i] <= '9') {}
        } else {
            return ASB_JSON_ERROR_INVAL;
        }
        if (i < n && s[i] == '.') {
            if (++i >= n) return ASB_JSON_ERROR_PART;
            if (s[i] < '0' || s[i] > '9') return ASB_JSON_ERROR_INVAL;
            while (++i < n && s[i] >= '0' && s[i] <= '9') {}
        }
        if (i < n && (s[i] == 'e' || s[i] == 'E')) {
            if (++i >= n) return ASB_JSON_ERROR_PART;
            if (s[i] == '+' || s[i] == '-') {
                if (++i >= n) return ASB_JSON_ERROR_PART;
            }
            if (s[i] < '0' || s[i] > '9') return ASB_JSON_ERROR_INVAL;
            while (++i < n && s[i] >= '0' && s[i] <= '9') {}
        }
    } else {
        return ASB_JSON_ERROR_INVAL;
    }
    if (i >= n) {
        if (!top_level) return ASB_JSON_ERROR_PART;
    } else if (!asb__json_is_delim(s[i])) {
        return ASB_JSON_ERROR_INVAL;
    }
    *end = i;
    return 0;
}

ASB_API void asb_json_init(asb_json_parser *parser) {
    memset(parser, 0, sizeof *parser);
    parser->toksuper = -1;
    parser->state = ASB__JS_VALUE;
}

/* Creates the next token, linked to its parent; the caller checked there is
   room. Counting mode (tokens == NULL) only advances the count. */
static void asb__json_new_token(asb_json_parser *p, asb_json_tok *toks,
                                asb_json_type type, int start, int end) {
    if (toks) {
        asb_json_tok *t = &toks[p->toknext];
        t->type = type;
        t->start = start;
        t->end = end;
        t->size = 0;
        t->parent = p->toksuper;
        if (p->toksuper >= 0) toks[p->toksuper].size++;
    }
    p->toknext++;
}

/* A value just completed: a member's value hands the parent role back from
   its key to the object. */
static void asb__json_value_done(asb_json_parser *p, asb_json_tok *toks) {
    if (p->depth == 0) {
        p->state = ASB__JS_DONE;
        return;
    }
    p->state = ASB__JS_AFTER;
    if (toks && p->toksuper >= 0 && toks[p->toksuper].type == ASB_JSON_STRING)
        p->toksuper = toks[p->toksuper].parent;
}

static int asb__json_kind_is_object(const asb_json_parser *p, int level) {
    return (p->kinds[level >> 3] >> (level & 7)) & 1;
}

ASB_API int asb_json_parse(asb_json_parser *p, const char *js, size_t len,
                           asb_json_tok *toks, unsigned int num_tokens) {
    const unsigned char *s = (const unsigned char *)js;
    unsigned int n;
    if (len > (size_t)INT_MAX) return ASB_JSON_ERROR_INVAL;
    n = (unsigned int)len;
    while (p->pos < n) {
        unsigned char c = s[p->pos];
        switch (c) {
        case ' ':
        case '\t':
        case '\n':
        case '\r':
            p->pos++;
            break;
        case '{':
        case '[': {
            int is_obj = c == '{';
            if (p->state != ASB__JS_VALUE && p->state != ASB__JS_VALUE_OR_CLOSE)
                return ASB_JSON_ERROR_INVAL;
            if (p->depth >= ASB_JSON_MAX_DEPTH) return ASB_JSON_ERROR_INVAL;
            if (toks && p->toknext >= num_tokens) return ASB_JSON_ERROR_NOMEM;
            asb__json_new_token(p, toks,
                                is_obj ? ASB_JSON_OBJECT : ASB_JSON_ARRAY,
                                (int)p->pos, -1);
            if (toks) p->toksuper = (int)p->toknext - 1;
            if (is_obj)
                p->kinds[p->depth >> 3] |= (unsigned char)(1u << (p->depth & 7));
            else
                p->kinds[p->depth >> 3] &=
                    (unsigned char)~(1u << (p->depth & 7));
            p->depth++;
            p->state = is_obj ? ASB__JS_KEY_OR_CLOSE : ASB__JS_VALUE_OR_CLOSE;
            p->pos++;
            break;
        }
        case '}':
        case ']': {
            int is_obj = c == '}';
            if (p->depth == 0 ||
                asb__json_kind_is_object(p, p->depth - 1) != is_obj)
                return ASB_JSON_ERROR_INVAL;
            if (p->state != ASB__JS_AFTER &&
                p->state != (is_obj ? ASB__JS_KEY_OR_CLOSE
                                    : ASB__JS_VALUE_OR_CLOSE))
                return ASB_JSON_ERROR_INVAL;
            p->depth--;
            if (toks) {
                /* here toksuper is the container being closed */
                toks[p->toksuper].end = (int)p->pos + 1;
                p->toksuper = toks[p->toksuper].parent;
            }
            p->pos++;
            asb__json_value_done(p, toks);
            break;
        }
        case ':':
            if (p->state != ASB__JS_COLON) return ASB_JSON_ERROR_INVAL;
            p->state = ASB__JS_VALUE;
            p->pos++;
            break;
        case ',':
            if (p->state != ASB__JS_AFTER) return ASB_JSON_ERROR_INVAL;
            p->state = asb__json_kind_is_object(p, p->depth - 1) ? ASB__JS_KEY
                                                                 : ASB__JS_VALUE;
            p->pos++;
            break;
        case '"': {
            unsigned int endq = 0;
            int r, is_key = p->state == ASB__JS_KEY ||
                            p->state == ASB__JS_KEY_OR_CLOSE;
            if (!is_key && p->state != ASB__JS_VALUE &&
                p->state != ASB__JS_VALUE_OR_CLOSE)
                return ASB_JSON_ERROR_INVAL;
            if (toks && p->toknext >= num_tokens) return ASB_JSON_ERROR_NOMEM;
            r = asb__json_scan_string(s, n, p->pos + 1, &endq);
            if (r != 0) return r;
            asb__json_new_token(p, toks, ASB_JSON_STRING, (int)p->pos + 1,
                                (int)endq);
            p->pos = endq + 1;
            if (is_key) {
                if (toks) p->toksuper = (int)p->toknext - 1;
                p->state = ASB__JS_COLON;
            } else {
                asb__json_value_done(p, toks);
            }
            break;
        }
        default: {
            unsigned int end = 0;
            int r;
            if (p->state != ASB__JS_VALUE && p->state != ASB__JS_VALUE_OR_CLOSE)
                return ASB_JSON_ERROR_INVAL;
            if (toks && p->toknext >= num_tokens) return ASB_JSON_ERROR_NOMEM;
            r = asb__json_scan_primitive(s, n, p->pos, &end, p->depth == 0);
            if (r != 0) return r;
            asb__json_new_token(p, toks, ASB_JSON_PRIMITIVE, (int)p->pos,
                                (int)end);
            p->pos = end;
            asb__json_value_done(p, toks);
            break;
        }
        }
    }
    if (p->state != ASB__JS_DONE) return ASB_JSON_ERROR_PART;
    return (int)p->toknext;
}

/* -- documents -------------------------------------------------------------- */

#ifndef ASB_JSON_MAX_DOC_TOKENS
#define ASB_JSON_MAX_DOC_TOKENS 16777216
#endif

ASB_API asb_result asb_json_doc_parse(asb_json_doc *doc, const char *js,
                                      size_t len, const asb_allocator *alloc,
                                      asb_error *err) {
    asb_json_parser p;
    size_t cap;
    int r;
    memset(doc, 0, sizeof *doc);
    if (!js && len) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "json: NULL text");
    if (asb__allocator_resolve(alloc, &doc->alloc) != ASB_OK)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "allocator: give all three functions or none");
    if (len > (size_t)INT_MAX)
        return asb__fail(err, ASB_ERR_TOO_LARGE,
                         "json: document of %zu bytes exceeds INT_MAX", len);
    /* Kubernetes JSON averages one token per 8-12 bytes; start near that and
       double, so large documents cost a few reallocations at most. */
    cap = len / 8 + 16;
    if (cap > ASB_JSON_MAX_DOC_TOKENS) cap = ASB_JSON_MAX_DOC_TOKENS;
    asb_json_init(&p);
    for (;;) {
        asb_json_tok *t = (asb_json_tok *)doc->alloc.realloc_fn(
            doc->toks, cap * sizeof *t, doc->alloc.user_data);
        if (!t) {
            asb_json_doc_free(doc);
            return asb__fail(err, ASB_ERR_OUT_OF_MEMORY,
                             "json: out of memory for %zu tokens", cap);
        }
        doc->toks = t;
        r = asb_json_parse(&p, js, len, doc->toks, (unsigned int)cap);
        if (r != ASB_JSON_ERROR_NOMEM) break;
        if (cap >= ASB_JSON_MAX_DOC_TOKENS) {
            asb_json_doc_free(doc);
            return asb__fail(err, ASB_ERR_TOO_LARGE,
                             "json: more than %d tokens", ASB_JSON_MAX_DOC_TOKENS);
        }
        cap = cap * 2 > ASB_JSON_MAX_DOC_TOKENS ? ASB_JSON_MAX_DOC_TOKENS
                                                : cap * 2;
    }
    if (r < 0) {
        size_t line = 1, col = 1, i, at = p.pos;
        for (i = 0; i < at && i < len; i++) {
            if (js[i] == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        asb_json_doc_free(doc);
        return asb__fail(err, ASB_ERR_JSON_INVALID,
                         r == ASB_JSON_ERROR_PART
                             ? "json: unexpected end of text (line %zu, column %zu)"
                             : "json: invalid at line %zu, column %zu",
                         line, col);
    }
    doc->js = js;
    doc->len = len;
    doc->count = r;
    return ASB_OK;
}

ASB_API void asb_json_doc_free(asb_json_doc *doc) {
    if (doc->toks && doc->alloc.free_fn)
        doc->alloc.free_fn(doc->toks, doc->alloc.user_data);
    doc->toks = NULL;
    doc->count = 0;
}

/* -- lookup ----------------------------------------------------------------- */

static int asb__json_valid_index(const asb_json_doc *doc, int tok) {
    return doc && doc->toks && tok >= 0 && tok < doc->count;
}

/* Tokens are in document order, so start offsets strictly increase and a
   value's subtree is the run of tokens that start before it ends. The scan
   strides 8 tokens while the 8th still lies inside (then all 8 do), and
   finishes one by one: a forward walk the prefetcher can follow, which
   measured faster than a galloping binary search (its probes miss the
   cache on large lists). No checks: callers pass a valid index. */
static int asb__json_skip_fast(const asb_json_tok *t, int count, int tok) {
    int i = tok + 1, end = t[tok].end;
    if (t[tok].type != ASB_JSON_OBJECT && t[tok].type != ASB_JSON_ARRAY)
        return i;
    while (count - i > 8 && t[i + 7].start < end) i += 8;
    while (i < count && t[i].start < end) i++;
    return i;
}

ASB_API int asb_json_skip(const asb_json_doc *doc, int tok) {
    if (!asb__json_valid_index(doc, tok)) return doc ? doc->count : 0;
    return asb__json_skip_fast(doc->toks, doc->count, tok);
}

/* Decodes one character of a string token's raw text at *i into UTF-8
   bytes. Returns the byte count, or 0 for an unpaired surrogate. The text
   was validated by the tokenizer, so escapes are well-formed. */
static int asb__json_decode_char(const unsigned char *s, size_t end, size_t *i,
                                 unsigned char out[4]) {
    unsigned long cp;
    if (s[*i] != '\\') {
        out[0] = s[(*i)++];
        return 1;
    }
    switch (s[*i + 1]) {
    case 'b': out[0] = '\b'; *i += 2; return 1;
    case 'f': out[0] = '\f'; *i += 2; return 1;
    case 'n': out[0] = '\n'; *i += 2; return 1;
    case 'r': out[0] = '\r'; *i += 2; return 1;
    case 't': out[0] = '\t'; *i += 2; return 1;
    case 'u': break;
    default: out[0] = s[*i + 1]; *i += 2; return 1;
    }
    cp = (unsigned long)((asb__hexval(s[*i + 2]) << 12) |
                         (asb__hexval(s[*i + 3]) << 8) |
                         (asb__hexval(s[*i + 4]) << 4) | asb__hexval(s[*i + 5]));
    *i += 6;
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        unsigned long lo;
        if (*i + 6 > end || s[*i] != '\\' || s[*i + 1] != 'u') return 0;
        lo = (unsigned long)((asb__hexval(s[*i + 2]) << 12) |
                             (asb__hexval(s[*i + 3]) << 8) |
                             (asb__hexval(s[*i + 4]) << 4) |
                             asb__hexval(s[*i + 5]));
        if (lo < 0xDC00 || lo > 0xDFFF) return 0;
        *i += 6;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
        return 0;
    }
    if (cp < 0x80) {
        out[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (unsigned char)(0xC0 | (cp >> 6));
        out[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (unsigned char)(0xE0 | (cp >> 12));
        out[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (unsigned char)(0xF0 | (cp >> 18));
    out[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

ASB_API int asb_json_string_eq(const asb_json_doc *doc, int tok, const char *s,
                               size_t len) {
    const asb_json_tok *t;
    const unsigned char *raw;
    size_t i, end, o = 0, rawlen;
    if (!asb__json_valid_index(doc, tok)) return 0;
    t = &doc->toks[tok];
    if (t->type != ASB_JSON_STRING) return 0;
    raw = (const unsigned char *)doc->js;
    i = (size_t)t->start;
    end = (size_t)t->end;
    rawlen = end - i;
    /* escapes are rare in keys: compare bytes when there are none */
    if (!memchr(raw + i, '\\', rawlen))
        return rawlen == len && (len == 0 || memcmp(raw + i, s, len) == 0);
    while (i < end) {
        unsigned char u[4];
        int k = asb__json_decode_char(raw, end, &i, u);
        if (k == 0 || o + (size_t)k > len || memcmp(s + o, u, (size_t)k) != 0)
            return 0;
        o += (size_t)k;
    }
    return o == len;
}

ASB_API int asb_json_member(const asb_json_doc *doc, int obj, const char *key,
                            size_t key_len) {
    int i, m;
    if (!asb__json_valid_index(doc, obj) ||
        doc->toks[obj].type != ASB_JSON_OBJECT)
        return -1;
    i = obj + 1;
    for (m = 0; m < doc->toks[obj].size && i + 1 < doc->count; m++) {
        if (asb_json_string_eq(doc, i, key, key_len)) return i + 1;
        i = asb__json_skip_fast(doc->toks, doc->count, i + 1);
    }
    return -1;
}

/* One path step: a member by name, or (for arrays) an element by index. */
static int asb__json_step(const asb_json_doc *doc, int cur, const char *seg,
                          size_t len, int bracket) {
    const asb_json_tok *t = &doc->toks[cur];
    if (t->type == ASB_JSON_OBJECT && !bracket)
        return asb_json_member(doc, cur, seg, len);
    if (t->type == ASB_JSON_ARRAY) {
        long idx = 0;
        int i, k;
        size_t j;
        if (len == 0 || len > 9) return -1;
        for (j = 0; j < len; j++) {
            if (seg[j] < '0' || seg[j] > '9') return -1;
            idx = idx * 10 + (seg[j] - '0');
        }
        if (idx >= t->size) return -1;
        i = cur + 1;
        for (k = 0; k < idx && i < doc->count; k++)
            i = asb__json_skip_fast(doc->toks, doc->count, i);
        return i < doc->count ? i : -1;
    }
    return -1;
}

ASB_API int asb_json_find(const asb_json_doc *doc, int from, const char *path) {
    /* A segment is at most a label key (253 + 1 + 63 bytes); longer ones
       cannot name a Kubernetes field, so they simply do not match. */
    char seg[384];
    const char *p = path;
    int cur = from;
    if (!asb__json_valid_index(doc, from) || !path) return -1;
    if (!*p) return cur;
    for (;;) {
        size_t sl = 0;
        int bracket = 0;
        if (*p == '[') {
            bracket = 1;
            p++;
            while (*p && *p != ']') {
                if (sl >= sizeof seg) return -1;
                seg[sl++] = *p++;
            }
            if (*p != ']') return -1;
            p++;
        } else {
            while (*p && *p != '.' && *p != '[') {
                if (*p == '\\' && (p[1] == '.' || p[1] == '\\' || p[1] == '['))
                    p++;
                if (sl >= sizeof seg) return -1;
                seg[sl++] = *p++;
            }
        }
        cur = asb__json_step(doc, cur, seg, sl, bracket);
        if (cur < 0) return -1;
        if (!*p) return cur;
        if (*p == '.') {
            p++;
            if (!*p) return -1;
        }
    }
}

ASB_API asb_json_iter asb_json_iter_begin(const asb_json_doc *doc, int tok) {
    asb_json_iter it;
    it.next = tok + 1;
    it.remaining = 0;
    it.is_object = 0;
    if (asb__json_valid_index(doc, tok) &&
        (doc->toks[tok].type == ASB_JSON_OBJECT ||
         doc->toks[tok].type == ASB_JSON_ARRAY)) {
        it.remaining = doc->toks[tok].size;
        it.is_object = doc->toks[tok].type == ASB_JSON_OBJECT;
    }
    return it;
}

ASB_API int asb_json_iter_next(const asb_json_doc *doc, asb_json_iter *it,
                               int *key, int *value) {
    int k = -1, v;
    if (it->remaining <= 0 || !asb__json_valid_index(doc, it->next)) return 0;
    v = it->next;
    if (it->is_object) {
        if (v + 1 >= doc->count) return 0;
        k = v; /* a member: the key, then its value */
        v = v + 1;
    }
    it->next = asb_json_skip(doc, v);
    it->remaining--;
    if (key) *key = k;
    if (value) *value = v;
    return 1;
}

/* -- typed getters ---------------------------------------------------------- */

/* Decodes a string token, calling `emit` per run of bytes; shared by the
   buffer and asb_buf getters so both unescape identically. */
typedef asb_result (*asb__emit_fn)(void *ctx, const unsigned char *b, size_t n);

static asb_result asb__json_decode_string(const asb_json_doc *doc, int tok,
                                          asb__emit_fn emit, void *ctx) {
    const asb_json_tok *t;
    const unsigned char *raw;
    size_t i, end;
    if (!asb__json_valid_index(doc, tok)) return ASB_ERR_INVALID_ARGUMENT;
    t = &doc->toks[tok];
    if (t->type != ASB_JSON_STRING) return ASB_ERR_JSON_TYPE;
    raw = (const unsigned char *)doc->js;
    i = (size_t)t->start;
    end = (size_t)t->end;
    while (i < end) {
        const unsigned char *bs = (const unsigned char *)memchr(raw + i, '\\', end - i);
        size_t run = bs ? (size_t)(bs - (raw + i)) : end - i;
        asb_result r;
        if (run) {
            r = emit(ctx, raw + i, run);
            if (r != ASB_OK) return r;
            i += run;
        }
        if (i < end) {
            unsigned char u[4];
            int k = asb__json_decode_char(raw, end, &i, u);
            if (k == 0) return ASB_ERR_JSON_INVALID; /* unpaired surrogate */
            r = emit(ctx, u, (size_t)k);
            if (r != ASB_OK) return r;
        }
    }
    return ASB_OK;
}

typedef struct asb__fixed_out {
    char *out;
    size_t cap, len;
} asb__fixed_out;

static asb_result asb__emit_fixed(void *ctx, const unsigned char *b, size_t n) {
    asb__fixed_out *f = (asb__fixed_out *)ctx;
    if (f->cap && f->len < f->cap - 1) {
        size_t room = f->cap - 1 - f->len;
        memcpy(f->out + f->len, b, n < room ? n : room);
    }
    f->len += n; /* keep counting so the caller learns the size needed */
    return ASB_OK;
}

static asb_result asb__emit_buf(void *ctx, const unsigned char *b, size_t n) {
    return asb_buf_append((asb_buf *)ctx, b, n);
}

ASB_API asb_result asb_json_get_string(const asb_json_doc *doc, int tok,
                                       char *out, size_t cap, size_t *out_len) {
    asb__fixed_out f;
    asb_result r;
    f.out = out;
    f.cap = out ? cap : 0;
    f.len = 0;
    r = asb__json_decode_string(doc, tok, asb__emit_fixed, &f);
    if (r != ASB_OK) {
        if (out && cap) out[0] = '\0';
        return r;
    }
    if (out_len) *out_len = f.len;
    if (f.len >= f.cap) {
        if (out && cap) out[cap - 1] = '\0';
        return ASB_ERR_TOO_LARGE;
    }
    out[f.len] = '\0';
    return ASB_OK;
}

ASB_API asb_result asb_json_append_string(const asb_json_doc *doc, int tok,
                                          asb_buf *out) {
    size_t before = out->len;
    asb_result r = asb__json_decode_string(doc, tok, asb__emit_buf, out);
    if (r == ASB_OK) r = asb_buf_reserve(out, 0); /* NUL even when empty */
    if (r != ASB_OK) {
        out->len = before; /* all or nothing */
        if (out->ptr) out->ptr[before] = '\0';
        return r;
    }
    out->ptr[out->len] = '\0';
    return ASB_OK;
}

/* A number token's text, or NULL. */
static const char *asb__json_number(const asb_json_doc *doc, int tok,
                                    size_t *len) {
    const asb_json_tok *t;
    char c;
    if (!asb__json_valid_index(doc, tok)) return NULL;
    t = &doc->toks[tok];
    if (t->type != ASB_JSON_PRIMITIVE) return NULL;
    c = doc->js[t->start];
    if (c != '-' && (c < '0' || c > '9')) return NULL;
    *len = (size_t)(t->end - t->start);
    return doc->js + t->start;
}

ASB_API asb_result asb_json_get_int64(const asb_json_doc *doc, int tok,
                                      int64_t *out) {
    size_t len = 0, i = 0;
    const char *s;
    int neg;
    uint64_t v = 0, limit;
    if (!asb__json_valid_index(doc, tok)) return ASB_ERR_INVALID_ARGUMENT;
    s = asb__json_number(doc, tok, &len);
    if (!s) return ASB_ERR_JSON_TYPE;
    neg = s[0] == '-';
    if (neg) i++;
    limit = neg ? (uint64_t)INT64_MAX + 1u : (uint64_t)INT64_MAX;
    for (; i < len; i++) {
        unsigned d;
        if (s[i] < '0' || s[i] > '9') return ASB_ERR_JSON_TYPE; /* . e E */
        d = (unsigned)(s[i] - '0');
        if (v > (limit - d) / 10) return ASB_ERR_JSON_RANGE;
        v = v * 10 + d;
    }
    if (neg)
        *out = v == (uint64_t)INT64_MAX + 1u ? INT64_MIN : -(int64_t)v;
    else
        *out = (int64_t)v;
    return ASB_OK;
}

ASB_API asb_result asb_json_get_double(const asb_json_doc *doc, int tok,
                                       double *out) {
    size_t len = 0, i, o = 0, dplen;
    const char *s, *dp;
    char small[64], *tmp = small, *endp = NULL;
    double v;
    if (!asb__json_valid_index(doc, tok)) return ASB_ERR_INVALID_ARGUMENT;
    s = asb__json_number(doc, tok, &len);
    if (!s) return ASB_ERR_JSON_TYPE;
    /* strtod follows LC_NUMERIC; JSON always uses '.', so translate to the
       current locale's decimal point rather than change the locale, which
       would race with other threads. */
    dp = localeconv()->decimal_point;
    dplen = dp && *dp ? strlen(dp) : 1;
    if (len + dplen + 1 > sizeof small) {
        tmp = (char *)doc->alloc.alloc_fn(len + dplen + 1, doc->alloc.user_data);
        if (!tmp) return ASB_ERR_OUT_OF_MEMORY;
    }
    for (i = 0; i < len; i++) {
        if (s[i] == '.') {
            memcpy(tmp + o, dp && *dp ? dp : ".", dplen);
            o += dplen;
        } else {
            tmp[o++] = s[i];
        }
    }
    tmp[o] = '\0';
    errno = 0;
    v = strtod(tmp, &endp);
    {
        int overflow = errno == ERANGE && (v == HUGE_VAL || v == -HUGE_VAL);
        int complete = endp == tmp + o;
        if (tmp != small) doc->alloc.free_fn(tmp, doc->alloc.user_data);
        if (!complete) return ASB_ERR_JSON_TYPE;
        if (overflow) return ASB_ERR_JSON_RANGE;
    }
    *out = v; /* underflow to 0 or a subnormal is the nearest double: fine */
    return ASB_OK;
}

ASB_API asb_result asb_json_get_bool(const asb_json_doc *doc, int tok,
                                     int *out) {
    char c;
    if (!asb__json_valid_index(doc, tok)) return ASB_ERR_INVALID_ARGUMENT;
    if (doc->toks[tok].type != ASB_JSON_PRIMITIVE) return ASB_ERR_JSON_TYPE;
    c = doc->js[doc->toks[tok].start];
    if (c != 't' && c != 'f') return ASB_ERR_JSON_TYPE;
    *out = c == 't';
    return ASB_OK;
}

ASB_API int asb_json_is_null(const asb_json_doc *doc, int tok) {
    return asb__json_valid_index(doc, tok) &&
           doc->toks[tok].type == ASB_JSON_PRIMITIVE &&
           doc->js[doc->toks[tok].start] == 'n';
}

/* -- writer ----------------------------------------------------------------- */

enum { ASB__W_OBJ = 1, ASB__W_COMMA = 2, ASB__W_KEYED = 4 };
#define ASB__W_MAX_DEPTH ((int)sizeof(((asb_json_writer *)0)->stack) - 1)

ASB_API void asb_json_writer_init(asb_json_writer *w, asb_buf *out) {
    memset(w, 0, sizeof *w);
    w->out = out;
    if (!out) w->err = ASB_ERR_INVALID_ARGUMENT;
}

static void asb__w_set(asb_json_writer *w, asb_result r) {
    if (w->err == ASB_OK && r != ASB_OK) w->err = r;
}

static void asb__w_put(asb_json_writer *w, const char *s, size_t n) {
    if (w->err == ASB_OK) asb__w_set(w, asb_buf_append(w->out, s, n));
}

/* Checks that a value may come here and writes the comma before it. */
static int asb__w_before_value(asb_json_writer *w) {
    unsigned char *f;
    if (w->err != ASB_OK) return 0;
    f = &w->stack[w->depth];
    if (w->depth == 0) {
        if (*f & ASB__W_COMMA) { /* a second top-level value */
            w->err = ASB_ERR_INVALID_ARGUMENT;
            return 0;
        }
        *f |= ASB__W_COMMA;
    } else if (*f & ASB__W_OBJ) {
        if (!(*f & ASB__W_KEYED)) { /* a member needs its key first */
            w->err = ASB_ERR_INVALID_ARGUMENT;
            return 0;
        }
        *f &= (unsigned char)~ASB__W_KEYED;
    } else {
        if (*f & ASB__W_COMMA) asb__w_put(w, ",", 1);
        *f |= ASB__W_COMMA;
    }
    return w->err == ASB_OK;
}

static void asb__w_string(asb_json_writer *w, const char *s, size_t len) {
    static const char hex[] = "0123456789abcdef";
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, run = 0;
    if (!s && len) {
        w->err = ASB_ERR_INVALID_ARGUMENT;
        return;
    }
    asb__w_put(w, "\"", 1);
    while (i < len && w->err == ASB_OK) {
        unsigned char c = u[i];
        char esc[6];
        size_t elen = 0;
        int l;
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            i++;
            run++;
            continue;
        }
        if (run) asb__w_put(w, s + i - run, run);
        run = 0;
        if (c >= 0x80) {
            l = asb__utf8_seq(u + i, len - i);
            if (l > 0) {
                asb__w_put(w, s + i, (size_t)l);
                i += (size_t)l;
                continue;
            }
            if (!w->replace_invalid_utf8) {
                w->err = ASB_ERR_INVALID_ARGUMENT;
                return;
            }
            asb__w_put(w, "\xEF\xBF\xBD", 3); /* U+FFFD */
            i++;
            continue;
        }
        esc[0] = '\\';
        switch (c) {
        case '"': esc[1] = '"'; elen = 2; break;
        case '\\': esc[1] = '\\'; elen = 2; break;
        case '\b': esc[1] = 'b'; elen = 2; break;
        case '\f': esc[1] = 'f'; elen = 2; break;
        case '\n': esc[1] = 'n'; elen = 2; break;
        case '\r': esc[1] = 'r'; elen = 2; break;
        case '\t': esc[1] = 't'; elen = 2; break;
        default:
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            elen = 6;
        }
        asb__w_put(w, esc, elen);
        i++;
    }
    if (run) asb__w_put(w, s + i - run, run);
    asb__w_put(w, "\"", 1);
}

/* A value already known to be valid JSON (the caller parsed it), as is. */
static void asb__w_raw(asb_json_writer *w, const char *js, size_t len) {
    if (asb__w_before_value(w)) asb__w_put(w, js, len);
}

static void asb__w_open(asb_json_writer *w, unsigned char kind, char c) {
    if (!asb__w_before_value(w)) return;
    if (w->depth >= ASB__W_MAX_DEPTH) {
        w->err = ASB_ERR_TOO_LARGE;
        return;
    }
    w->stack[++w->depth] = kind;
    asb__w_put(w, &c, 1);
}

static void asb__w_close(asb_json_writer *w, unsigned char kind, char c) {
    unsigned char f;
    if (w->err != ASB_OK) return;
    f = w->stack[w->depth];
    if (w->depth == 0 || (f & ASB__W_OBJ) != kind || (f & ASB__W_KEYED)) {
        w->err = ASB_ERR_INVALID_ARGUMENT;
        return;
    }
    w->depth--;
    asb__w_put(w, &c, 1);
}

ASB_API void asb_json_object_begin(asb_json_writer *w) { asb__w_open(w, ASB__W_OBJ, '{'); }
ASB_API void asb_json_object_end(asb_json_writer *w) { asb__w_close(w, ASB__W_OBJ, '}'); }
ASB_API void asb_json_array_begin(asb_json_writer *w) { asb__w_open(w, 0, '['); }
ASB_API void asb_json_array_end(asb_json_writer *w) { asb__w_close(w, 0, ']'); }

ASB_API void asb_json_key_n(asb_json_writer *w, const char *key, size_t len) {
    unsigned char *f;
    if (w->err != ASB_OK) return;
    f = &w->stack[w->depth];
    if (w->depth == 0 || !(*f & ASB__W_OBJ) || (*f & ASB__W_KEYED)) {
        w->err = ASB_ERR_INVALID_ARGUMENT;
        return;
    }
    if (*f & ASB__W_COMMA) asb__w_put(w, ",", 1);
    *f |= ASB__W_COMMA | ASB__W_KEYED;
    asb__w_string(w, key, len);
    asb__w_put(w, ":", 1);
}

ASB_API void asb_json_key(asb_json_writer *w, const char *key) {
    if (!key) {
        asb__w_set(w, ASB_ERR_INVALID_ARGUMENT);
        return;
    }
    asb_json_key_n(w, key, strlen(key));
}

ASB_API void asb_json_string_n(asb_json_writer *w, const char *s, size_t len) {
    if (asb__w_before_value(w)) asb__w_string(w, s, len);
}

ASB_API void asb_json_string(asb_json_writer *w, const char *s) {
    if (!s) {
        asb__w_set(w, ASB_ERR_INVALID_ARGUMENT);
        return;
    }
    asb_json_string_n(w, s, strlen(s));
}

ASB_API void asb_json_int64(asb_json_writer *w, int64_t v) {
    char tmp[24];
    int n;
    if (!asb__w_before_value(w)) return;
    n = snprintf(tmp, sizeof tmp, "%lld", (long long)v);
    asb__w_put(w, tmp, (size_t)n);
}

ASB_API void asb_json_double(asb_json_writer *w, double v) {
    char tmp[40];
    const char *dp;
    int prec, n = 0;
    size_t dplen;
    if (v != v || v > DBL_MAX || v < -DBL_MAX) {
        asb__w_set(w, ASB_ERR_INVALID_ARGUMENT);
        return;
    }
    if (!asb__w_before_value(w)) return;
    /* the shortest of %.15g..%.17g that reads back exactly */
    for (prec = 15; prec <= 17; prec++) {
        n = snprintf(tmp, sizeof tmp, "%.*g", prec, v);
        if (strtod(tmp, NULL) == v) break;
    }
    /* undo the locale's decimal point: JSON wants '.' */
    dp = localeconv()->decimal_point;
    dplen = dp ? strlen(dp) : 0;
    if (dplen && !(dplen == 1 && dp[0] == '.')) {
        char *at = strstr(tmp, dp);
        if (at) {
            *at = '.';
            memmove(at + 1, at + dplen, strlen(at + dplen) + 1);
            n = (int)strlen(tmp);
        }
    }
    asb__w_put(w, tmp, (size_t)n);
}

ASB_API void asb_json_bool(asb_json_writer *w, int v) {
    if (asb__w_before_value(w)) asb__w_put(w, v ? "true" : "false", v ? 4u : 5u);
}

ASB_API void asb_json_null(asb_json_writer *w) {
    if (asb__w_before_value(w)) asb__w_put(w, "null", 4);
}

ASB_API asb_result asb_json_writer_finish(asb_json_writer *w) {
    if (w->err != ASB_OK) return w->err;
    if (w->depth != 0 || !(w->stack[0] & ASB__W_COMMA))
        return ASB_ERR_INVALID_ARGUMENT; /* unclosed, or nothing written */
    return ASB_OK;
}

/* >>rules ===================================================================
   The SDK's client-side rules (PROTOCOL §6) and the encodings they need. */

ASB_API asb_result asb_path_normalize(const char *path, size_t len, char *out,
                                      size_t cap, size_t *out_len,
                                      asb_error *err) {
    char q[80];
    size_t i, b, e, o = 0;
    int absolute;
    if (!path || (!out && cap))
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "path: NULL argument");
    /* Control bytes first: a NUL would truncate the path at the server's
       syscall after our checks had looked at the whole string. */
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)path[i];
        if (c < 0x20 || c == 0x7f) {
            asb__quote(q, sizeof q, path, len, 48);
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                             "path \"%s\" contains control character 0x%02x at "
                             "byte %zu",
                             q, c, i);
        }
    }
    b = 0;
    e = len;
    while (b < e && path[b] == ' ') b++;
    while (e > b && path[e - 1] == ' ') e--;
    asb__quote(q, sizeof q, path, len, 48);
    if (b == e)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "path is empty");
    absolute = path[b] == '/';
    /* Lexical normalisation, segment by segment, writing into out as a
       stack of segments joined by '/'. */
    i = b;
    while (i < e) {
        size_t s0, sl;
        while (i < e && path[i] == '/') i++;
        s0 = i;
        while (i < e && path[i] != '/') i++;
        sl = i - s0;
        if (sl == 0 || (sl == 1 && path[s0] == '.')) continue;
        if (sl == 2 && path[s0] == '.' && path[s0 + 1] == '.') {
            int top_is_dotdot = o >= 2 && out[o - 1] == '.' &&
                                out[o - 2] == '.' &&
                                (o == 2 || out[o - 3] == '/');
            if (o > 0 && !top_is_dotdot) {
                while (o > 0 && out[o - 1] != '/') o--; /* pop a segment */
                if (o > 0) o--;
                continue;
            }
            if (absolute) continue; /* ".." at the root stays at the root */
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                             "path \"%s\" escapes the base directory with '..'",
                             q);
        }
        if (o + (o ? 1 : 0) + sl + 1 > cap)
            return asb__fail(err, ASB_ERR_TOO_LARGE,
                             "path \"%s\" does not fit in %zu bytes", q, cap);
        if (o) out[o++] = '/';
        memcpy(out + o, path + s0, sl);
        o += sl;
    }
    if (o == 0)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "path \"%s\" names the base directory, not a file", q);
    out[o] = '\0';
    if (out_len) *out_len = o;
    return ASB_OK;
}

static int asb__is_alnum(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
           (c >= '0' && c <= '9');
}
static int asb__is_lower_alnum(unsigned char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`, at most 63 bytes: a label name
   or a non-empty label value. Returns a description of the first problem,
   or NULL. */
static const char *asb__label_name_problem(const char *s, size_t len) {
    size_t i;
    if (len > 63) return "is longer than 63 characters";
    if (!asb__is_alnum((unsigned char)s[0]) ||
        !asb__is_alnum((unsigned char)s[len - 1]))
        return "must begin and end with a letter or digit";
    for (i = 1; i + 1 < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!asb__is_alnum(c) && c != '-' && c != '_' && c != '.')
            return "may contain only letters, digits, '-', '_' and '.'";
    }
    return NULL;
}

ASB_API asb_result asb_label_validate_key(const char *key, size_t len,
                                          asb_error *err) {
    char q[96];
    const char *slash, *why;
    size_t plen, i;
    if (!key) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "label key is NULL");
    asb__quote(q, sizeof q, key, len, 64);
    if (len == 0)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "label key is empty");
    slash = (const char *)memchr(key, '/', len);
    if (slash) {
        plen = (size_t)(slash - key);
        if (plen == 0)
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                             "label key \"%s\": prefix before '/' is empty", q);
        if (plen > 253)
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                             "label key \"%s\": prefix is longer than 253 "
                             "characters",
                             q);
        if (!asb__is_lower_alnum((unsigned char)key[0]) ||
            !asb__is_lower_alnum((unsigned char)key[plen - 1]))
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                             "label key \"%s\": prefix must be a DNS subdomain "
                             "(begin and end with a lowercase letter or digit)",
                             q);
        for (i = 0; i < plen; i++) {
            unsigned char c = (unsigned char)key[i];
            if (!asb__is_lower_alnum(c) && c != '-' && c != '.')
                return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                                 "label key \"%s\": prefix must be a DNS "
                                 "subdomain (lowercase letters, digits, '-', "
                                 "'.')",
                                 q);
        }
        key = slash + 1;
        len -= plen + 1;
        if (len == 0)
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                             "label key \"%s\": name after '/' is empty", q);
    }
    why = asb__label_name_problem(key, len);
    if (why)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "label key \"%s\": name %s", q, why);
    return ASB_OK;
}

ASB_API asb_result asb_label_validate_value(const char *value, size_t len,
                                            asb_error *err) {
    char q[96];
    const char *why;
    if (!value)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "label value is NULL");
    if (len == 0) return ASB_OK;
    why = asb__label_name_problem(value, len);
    if (why) {
        asb__quote(q, sizeof q, value, len, 64);
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "label value \"%s\" %s",
                         q, why);
    }
    return ASB_OK;
}

ASB_API asb_result asb_labels_validate(const asb_label *labels, size_t count,
                                       asb_error *err) {
    size_t i;
    if (!labels && count)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "labels: NULL array");
    for (i = 0; i < count; i++) {
        asb_result r;
        if (!labels[i].key || !labels[i].value)
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                             "label %zu has a NULL key or value", i);
        r = asb_label_validate_key(labels[i].key, strlen(labels[i].key), err);
        if (r != ASB_OK) return r;
        r = asb_label_validate_value(labels[i].value, strlen(labels[i].value),
                                     err);
        if (r != ASB_OK) {
            if (err) {
                /* say whose value it was */
                char q[96], m[ASB_ERROR_MESSAGE_SIZE];
                asb__quote(q, sizeof q, labels[i].key, strlen(labels[i].key), 64);
                memcpy(m, err->message, sizeof m);
                snprintf(err->message, sizeof err->message, "%.380s (key \"%s\")",
                         m, q);
            }
            return r;
        }
    }
    return ASB_OK;
}

ASB_API asb_result asb_dns_label_validate(const char *name, size_t len,
                                          asb_error *err) {
    char q[96];
    size_t i;
    if (!name) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "name is NULL");
    asb__quote(q, sizeof q, name, len, 64);
    if (len == 0) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "name is empty");
    if (len > 63)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "name \"%s\" is longer than 63 characters", q);
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        if (!asb__is_lower_alnum(c) && !(c == '-' && i > 0 && i + 1 < len))
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                             "name \"%s\" is not a DNS-1123 label (lowercase "
                             "letters, digits and inner '-')",
                             q);
    }
    return ASB_OK;
}

ASB_API asb_result asb_claim_name_validate(const char *name, size_t len,
                                           asb_error *err) {
    char q[96];
    size_t i;
    if (!name) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "claim name is NULL");
    asb__quote(q, sizeof q, name, len, 64);
    if (len == 0) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "claim name is empty");
    if (len > 253)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "claim name \"%s\" is longer than 253 characters", q);
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        int edge = i == 0 || i + 1 == len || name[i - 1] == '.' || name[i + 1] == '.';
        if (asb__is_lower_alnum(c)) continue;
        if ((c == '-' || c == '.') && !edge) continue;
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "claim name \"%s\" is not a DNS-1123 subdomain (lowercase "
                         "letters, digits, '-' and '.', starting and ending with a letter "
                         "or digit)",
                         q);
    }
    return ASB_OK;
}

ASB_API asb_result asb_env_name_validate(const char *name, size_t len, asb_error *err) {
    char q[96];
    size_t i;
    if (!name) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "env: name is NULL");
    asb__quote(q, sizeof q, name, len, 64);
    if (len == 0) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "env: name is empty");
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)name[i];
        int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
        if (alpha || c == '-' || c == '.' || c == '_' || (i > 0 && c >= '0' && c <= '9'))
            continue;
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "env: name \"%s\" must be letters, digits, '_', '-' or '.' and "
                         "must not start with a digit",
                         q);
    }
    if ((len == 1 && name[0] == '.') || (len >= 2 && name[0] == '.' && name[1] == '.'))
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "env: name \"%s\" must not be '.' or '..' or start with '..'", q);
    return ASB_OK;
}

ASB_API asb_result asb_claim_name_generate(char out[ASB_CLAIM_NAME_SIZE],
                                           asb_error *err) {
    static const char hex[] = "0123456789abcdef";
    unsigned char rnd[4];
    char why[200];
    int i;
    if (asb__random_bytes_why(rnd, sizeof rnd, why, sizeof why) != ASB_OK)
        return asb__fail(err, ASB_ERR_IO, "claim name: %s", why);
    memcpy(out, "sandbox-claim-", 14);
    for (i = 0; i < 4; i++) {
        out[14 + 2 * i] = hex[rnd[i] >> 4];
        out[15 + 2 * i] = hex[rnd[i] & 15];
    }
    out[22] = '\0';
    return ASB_OK;
}

/* Parses a dotted-quad IPv4 or an IPv6 literal with inet_pton semantics
   (strict: no octal, no short forms); returns 4, 6 or 0. */
static int asb__ip_literal(const char *s, size_t len, unsigned char out[16]) {
    char tmp[64];
    /* a NUL inside would end inet_pton's string early: "::1\0junk" */
    if (len == 0 || len >= sizeof tmp || memchr(s, '\0', len)) return 0;
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    if (inet_pton(AF_INET, tmp, out) == 1) return 4;
    if (inet_pton(AF_INET6, tmp, out) == 1) return 6;
    return 0;
}

/* A label libc's inet_aton could read as a number: decimal digits, or
   0x followed by hex digits (even none). */
static int asb__numeric_label(const char *l, size_t n) {
    size_t i = 0;
    if (n >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X')) {
        for (i = 2; i < n; i++)
            if (asb__hexval((unsigned char)l[i]) < 0) return 0;
        return 1;
    }
    for (i = 0; i < n; i++)
        if (l[i] < '0' || l[i] > '9') return 0;
    return n > 0;
}

ASB_API asb_result asb_gateway_address_validate(const char *a, size_t len, asb_error *err) {
    char q[96];
    unsigned char bin[16];
    size_t i, ls = 0;
    int all_numeric = 1, last_numeric = 0;
    if (!a) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "gateway address is NULL");
    asb__quote(q, sizeof q, a, len, 64);
    if (len == 0 || len > 253)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "gateway address \"%s\": bad length", q);
    /* IPv6 literals have ':'; dotted quads are checked strictly (inet_pton
       refuses octal, hex and short forms) */
    if (memchr(a, ':', len))
        return asb__ip_literal(a, len, bin) == 6
                   ? ASB_OK
                   : asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                               "gateway address \"%s\" is not an IPv6 address (ports are not "
                               "allowed)",
                               q);
    if (asb__ip_literal(a, len, bin) == 4) return ASB_OK;
    for (i = 0; i <= len; i++) {
        if (i < len && a[i] != '.') {
            if (!asb__is_alnum((unsigned char)a[i]) && a[i] != '-')
                return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                                 "gateway address \"%s\" is not an IP address or a plain "
                                 "hostname",
                                 q);
            continue;
        }
        if (i == ls || i - ls > 63 || a[ls] == '-' || a[i - 1] == '-')
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                             "gateway address \"%s\": a label is empty, longer than 63 or has "
                             "'-' at an end",
                             q);
        last_numeric = asb__numeric_label(a + ls, i - ls);
        if (!last_numeric) all_numeric = 0;
        ls = i + 1;
    }
    /* all-numeric names read as addresses by inet_aton (2130706433,
       0x7f.0.0.1), and a numeric last label is never a DNS name */
    if (all_numeric || last_numeric)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "gateway address \"%s\" is a numeric form, not an address or a name",
                         q);
    return ASB_OK;
}

/* -- time ------------------------------------------------------------------- */

/* Proleptic Gregorian calendar arithmetic on day numbers (day 0 is
   1970-01-01), by eras of 400 years; no timegm(), which is not standard C
   and depends on the TZ environment on some libcs. */
static int64_t asb__days_from_civil(int64_t y, int m, int d) {
    int64_t era, yoe, doy, doe;
    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static void asb__civil_from_days(int64_t z, int64_t *y, int *m, int *d) {
    int64_t era, doe, yoe, doy, mp;
    z += 719468;
    era = (z >= 0 ? z : z - 146096) / 146097;
    doe = z - era * 146097;
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;
    *d = (int)(doy - (153 * mp + 2) / 5 + 1);
    *m = (int)(mp < 10 ? mp + 3 : mp - 9);
    *y = yoe + era * 400 + (*m <= 2);
}

#define ASB__TIME_MIN ((int64_t)-62167219200LL) /* 0000-01-01T00:00:00Z */
#define ASB__TIME_MAX ((int64_t)253402300799LL) /* 9999-12-31T23:59:59Z */

ASB_API asb_result asb_time_format_rfc3339(int64_t t, char out[ASB_TIME_SIZE]) {
    int64_t days, secs, y;
    int m, d;
    if (t < ASB__TIME_MIN || t > ASB__TIME_MAX) return ASB_ERR_INVALID_ARGUMENT;
    days = t >= 0 ? t / 86400 : -((-t + 86399) / 86400);
    secs = t - days * 86400;
    asb__civil_from_days(days, &y, &m, &d);
    {
        /* fixed layout, so place the digits directly */
        int f[6], w[6] = {4, 2, 2, 2, 2, 2}, k, j, o = 0;
        static const char sep[6] = {'-', '-', 'T', ':', ':', 'Z'};
        f[0] = (int)y;
        f[1] = m;
        f[2] = d;
        f[3] = (int)(secs / 3600);
        f[4] = (int)(secs / 60 % 60);
        f[5] = (int)(secs % 60);
        for (k = 0; k < 6; k++) {
            for (j = w[k] - 1; j >= 0; j--) {
                out[o + j] = (char)('0' + f[k] % 10);
                f[k] /= 10;
            }
            o += w[k];
            out[o++] = sep[k];
        }
        out[o] = '\0';
    }
    return ASB_OK;
}

ASB_API asb_result asb_shutdown_time_from_ttl(int64_t now, int64_t ttl_seconds,
                                              char out[ASB_TIME_SIZE],
                                              asb_error *err) {
    if (ttl_seconds <= 0)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "shutdown_after_seconds must be a positive number of "
                         "seconds (got %lld)",
                         (long long)ttl_seconds);
    if (now < ASB__TIME_MIN || now > ASB__TIME_MAX ||
        ttl_seconds > ASB__TIME_MAX - now)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "shutdown_after_seconds %lld overflows the clock "
                         "(past year 9999)",
                         (long long)ttl_seconds);
    return asb_time_format_rfc3339(now + ttl_seconds, out);
}

/* Reads exactly n decimal digits. */
static int asb__digits(const char *s, int n, int *out) {
    int v = 0, i;
    for (i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return 0;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 1;
}

ASB_API asb_result asb_time_parse_rfc3339(const char *s, size_t len,
                                          int64_t *out, asb_error *err) {
    static const int mdays[12] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int y, mo, d, h, mi, sec, oh = 0, om = 0, maxd;
    size_t i = 19;
    int64_t t;
    char q[80];
    if (!s) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "time: NULL");
    asb__quote(q, sizeof q, s, len, 40);
    if (len < 20 || !asb__digits(s, 4, &y) || s[4] != '-' ||
        !asb__digits(s + 5, 2, &mo) || s[7] != '-' ||
        !asb__digits(s + 8, 2, &d) ||
        (s[10] != 'T' && s[10] != 't' && s[10] != ' ') ||
        !asb__digits(s + 11, 2, &h) || s[13] != ':' ||
        !asb__digits(s + 14, 2, &mi) || s[16] != ':' ||
        !asb__digits(s + 17, 2, &sec))
        goto bad;
    if (mo < 1 || mo > 12 || h > 23 || mi > 59 || sec > 60) goto bad;
    maxd = mdays[mo - 1] +
           (mo == 2 && (y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)));
    if (d < 1 || d > maxd) goto bad;
    if (s[i] == '.') {
        size_t f = ++i;
        while (i < len && s[i] >= '0' && s[i] <= '9') i++;
        if (i == f) goto bad;
    }
    if (i >= len) goto bad;
    if (s[i] == 'Z' || s[i] == 'z') {
        i++;
    } else if (s[i] == '+' || s[i] == '-') {
        if (i + 6 > len || !asb__digits(s + i + 1, 2, &oh) || s[i + 3] != ':' ||
            !asb__digits(s + i + 4, 2, &om) || oh > 23 || om > 59)
            goto bad;
        if (s[i] == '-') {
            oh = -oh;
            om = -om;
        }
        i += 6;
    } else {
        goto bad;
    }
    if (i != len) goto bad;
    t = asb__days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec;
    *out = t - (int64_t)oh * 3600 - (int64_t)om * 60;
    return ASB_OK;
bad:
    return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                     "time \"%s\" is not an RFC 3339 date-time", q);
}

/* -- encodings -------------------------------------------------------------- */

ASB_API asb_result asb_percent_encode_segment(const char *s, size_t len,
                                              asb_buf *out) {
    static const char hex[] = "0123456789ABCDEF";
    size_t i;
    asb_result r;
    if (!s && len) return ASB_ERR_INVALID_ARGUMENT;
    if ((len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
        return asb_buf_append(out, "%2E%2E", 3 * len);
    r = asb_buf_reserve(out, len * 3);
    if (r != ASB_OK) return r;
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (asb__is_alnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
            out->ptr[out->len++] = (char)c;
        } else {
            out->ptr[out->len++] = '%';
            out->ptr[out->len++] = hex[c >> 4];
            out->ptr[out->len++] = hex[c & 15];
        }
    }
    out->ptr[out->len] = '\0';
    return ASB_OK;
}

static const char asb__b64[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

ASB_API asb_result asb_base64_encode(const void *data, size_t len,
                                     asb_buf *out) {
    const unsigned char *p = (const unsigned char *)data;
    size_t i;
    char *o;
    asb_result r;
    if (!data && len) return ASB_ERR_INVALID_ARGUMENT;
    if (len / 3 >= SIZE_MAX / 4 - 1) return ASB_ERR_OUT_OF_MEMORY;
    r = asb_buf_reserve(out, (len + 2) / 3 * 4);
    if (r != ASB_OK) return r;
    o = out->ptr + out->len;
    for (i = 0; i + 2 < len; i += 3) {
        unsigned long v = (unsigned long)p[i] << 16 | (unsigned long)p[i + 1] << 8 | p[i + 2];
        *o++ = asb__b64[v >> 18];
        *o++ = asb__b64[(v >> 12) & 63];
        *o++ = asb__b64[(v >> 6) & 63];
        *o++ = asb__b64[v & 63];
    }
    if (i < len) {
        unsigned long v = (unsigned long)p[i] << 16;
        if (i + 1 < len) v |= (unsigned long)p[i + 1] << 8;
        *o++ = asb__b64[v >> 18];
        *o++ = asb__b64[(v >> 12) & 63];
        *o++ = i + 1 < len ? asb__b64[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    out->len = (size_t)(o - out->ptr);
    *o = '\0';
    return ASB_OK;
}

static int asb__b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

ASB_API asb_result asb_base64_decode(const char *s, size_t len, asb_buf *out,
                                     asb_error *err) {
    size_t i, before = out->len, nq = 0;
    unsigned long acc = 0;
    int pad = 0;
    asb_result r;
    if (!s && len) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "base64: NULL");
    r = asb_buf_reserve(out, len / 4 * 3 + 3);
    if (r != ASB_OK) return asb__fail(err, r, "base64: out of memory");
    for (i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        int v;
        if (c == '\r' || c == '\n') continue;
        if (c == '=') {
            /* padding only in the last quantum's last one or two places */
            if (nq < 2) goto bad;
            pad++;
            nq++;
            if (nq == 4) break;
            continue;
        }
        if (pad) goto bad;
        v = asb__b64_value(c);
        if (v < 0) goto bad;
        acc = acc << 6 | (unsigned long)v;
        if (++nq == 4) {
            out->ptr[out->len++] = (char)(acc >> 16);
            out->ptr[out->len++] = (char)(acc >> 8);
            out->ptr[out->len++] = (char)acc;
            acc = 0;
            nq = 0;
        }
    }
    for (i = i < len ? i + 1 : i; i < len; i++) /* only line breaks after '=' */
        if (s[i] != '\r' && s[i] != '\n') goto bad;
    if (pad) {
        if (nq != 4) goto bad;
        acc <<= 6 * (unsigned)pad; /* the padded places count as zero bits */
        if (pad == 2) {
            if (acc & 0xFFFF) goto bad; /* trailing bits must be zero */
            out->ptr[out->len++] = (char)(acc >> 16);
        } else {
            if (acc & 0xFF) goto bad;
            out->ptr[out->len++] = (char)(acc >> 16);
            out->ptr[out->len++] = (char)(acc >> 8);
        }
    } else if (nq != 0) {
        goto bad; /* unpadded tail */
    }
    out->ptr[out->len] = '\0';
    return ASB_OK;
bad:
    out->len = before;
    out->ptr[before] = '\0';
    return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                     "base64: invalid input at byte %zu", i);
}

/* >>yaml ====================================================================
   A YAML reader for kubeconfig files: block and flow collections, every
   scalar style, comments; a clear error with line and column for anything
   it does not read, never a guessed value. Nodes and strings live in an
   arena freed at once. */

#ifndef ASB_YAML_MAX_DEPTH
#define ASB_YAML_MAX_DEPTH 64
#endif
/* Aliases share their anchor's nodes, so memory stays flat, but a reader
   walking the tree sees every copy: the nodes all aliases and merges
   stand for, together, are capped (go-yaml refuses "excessive aliasing"
   too), and so are the anchors a document may define. */
#ifndef ASB_YAML_MAX_ALIAS_NODES
#define ASB_YAML_MAX_ALIAS_NODES 65536
#endif
#ifndef ASB_YAML_MAX_ANCHORS
#define ASB_YAML_MAX_ANCHORS 1024
#endif

typedef struct asb__arena_chunk {
    struct asb__arena_chunk *next;
    size_t used, cap;
} asb__arena_chunk;

typedef struct asb__arena {
    asb__arena_chunk *head;
    asb_allocator alloc;
} asb__arena;

/* Chunk header rounded up so the data after it is 16-byte aligned. */
#define ASB__ARENA_HDR ((sizeof(asb__arena_chunk) + 15) & ~(size_t)15)

static void *asb__arena_alloc(asb__arena *a, size_t size) {
    asb__arena_chunk *c = a->head;
    size = (size + 15) & ~(size_t)15;
    if (!c || c->cap - c->used < size) {
        size_t cap = size > 16384 ? size : 16384;
        c = (asb__arena_chunk *)a->alloc.alloc_fn(ASB__ARENA_HDR + cap, a->alloc.user_data);
        if (!c) return NULL;
        c->next = a->head;
        c->used = 0;
        c->cap = cap;
        a->head = c;
    }
    c->used += size;
    return (char *)c + ASB__ARENA_HDR + c->used - size;
}

static void asb__arena_free(asb__arena *a) {
    while (a && a->head) {
        asb__arena_chunk *n = a->head->next;
        a->alloc.free_fn(a->head, a->alloc.user_data);
        a->head = n;
    }
}

/* An empty arena allocated with `alloc`; NULL when out of memory. */
static asb__arena *asb__arena_new(const asb_allocator *alloc) {
    asb__arena *a = (asb__arena *)alloc->alloc_fn(sizeof *a, alloc->user_data);
    if (a) {
        a->head = NULL;
        a->alloc = *alloc;
    }
    return a;
}

/* Frees every chunk and the arena itself; `wipe` zeroes them first (they
   may hold secrets). */
static void asb__arena_destroy(asb__arena *a, int wipe) {
    asb__arena_chunk *c;
    if (!a) return;
    if (wipe)
        for (c = a->head; c; c = c->next) asb__wipe((char *)c + ASB__ARENA_HDR, c->used);
    asb__arena_free(a);
    a->alloc.free_fn(a, a->alloc.user_data);
}

typedef struct asb__yanchor {
    struct asb__yanchor *prev; /* the one defined before */
    const char *name;
    size_t len;
    const asb_yaml_node *node;
} asb__yanchor;

typedef struct asb__yp {
    const char *s;
    size_t n, pos, line_start;
    int line;
    int depth;
    const char *name;
    asb_error *err;
    int failed;
    asb__arena *arena;
    asb_buf tmp; /* scalar being decoded */
    asb__yanchor *anchors; /* newest first: a redefinition wins */
    int nanchors;
    long alias_budget; /* nodes aliases may still stand for */
} asb__yp;

static int asb__yp_col(const asb__yp *p) { return (int)(p->pos - p->line_start) + 1; }

static asb_yaml_node *asb__yp_fail(asb__yp *p, int line, int col, const char *what) {
    if (!p->failed) {
        char nq[120];
        asb__quote(nq, sizeof nq, p->name, strlen(p->name), 100);
        asb__fail(p->err, ASB_ERR_KUBECONFIG, "%s:%d:%d: %s", nq, line, col, what);
        p->failed = 1;
    }
    return NULL;
}
#define ASB__YFAIL(p, what) asb__yp_fail((p), (p)->line, asb__yp_col(p), (what))

static asb_yaml_node *asb__yp_node(asb__yp *p, asb_yaml_type t, int line, int col) {
    asb_yaml_node *nd = (asb_yaml_node *)asb__arena_alloc(p->arena, sizeof *nd);
    if (!nd) return asb__yp_fail(p, line, col, "out of memory");
    memset(nd, 0, sizeof *nd);
    nd->type = t;
    nd->line = line;
    nd->col = col;
    nd->str = "";
    return nd;
}

/* Turns p->tmp into the node's string, copied into the arena. */
static asb_yaml_node *asb__yp_scalar(asb__yp *p, int line, int col, int plain) {
    asb_yaml_node *nd = asb__yp_node(p, ASB_YAML_SCALAR, line, col);
    char *str;
    if (!nd) return NULL;
    str = (char *)asb__arena_alloc(p->arena, p->tmp.len + 1);
    if (!str) return asb__yp_fail(p, line, col, "out of memory");
    if (p->tmp.len) memcpy(str, p->tmp.ptr, p->tmp.len);
    str[p->tmp.len] = '\0';
    nd->str = str;
    nd->len = p->tmp.len;
    nd->plain = plain;
    /* the core schema's nulls, when unquoted */
    if (plain && (nd->len == 0 || (nd->len == 1 && str[0] == '~') ||
                  (nd->len == 4 && (!strcmp(str, "null") || !strcmp(str, "Null") ||
                                    !strcmp(str, "NULL")))))
        nd->type = ASB_YAML_NULL;
    return nd;
}

static void asb__yp_append(asb_yaml_node *parent, asb_yaml_node **last, asb_yaml_node *child) {
    if (*last)
        (*last)->next = child;
    else
        parent->first = child;
    *last = child;
    parent->count++;
}

static int asb__yp_eol(const asb__yp *p) {
    return p->pos >= p->n || p->s[p->pos] == '\n' ||
           (p->s[p->pos] == '\r' && (p->pos + 1 >= p->n || p->s[p->pos + 1] == '\n'));
}

static void asb__yp_spaces(asb__yp *p) {
    while (p->pos < p->n && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t')) p->pos++;
}

/* Past the end of the current line (its newline included). */
static void asb__yp_next_line(asb__yp *p) {
    while (p->pos < p->n && p->s[p->pos] != '\n') p->pos++;
    if (p->pos < p->n) {
        p->pos++;
        p->line++;
        p->line_start = p->pos;
    }
}

/* After a value on a line: only spaces and a comment may follow. */
static int asb__yp_end_line(asb__yp *p) {
    size_t before = p->pos;
    asb__yp_spaces(p);
    if (p->pos < p->n && p->s[p->pos] == '#' && (p->pos == before ? (before == p->line_start) || p->s[before - 1] == ' ' || p->s[before - 1] == '\t' : 1)) {
        asb__yp_next_line(p);
        return 1;
    }
    if (!asb__yp_eol(p)) {
        ASB__YFAIL(p, "unexpected text after a value");
        return 0;
    }
    asb__yp_next_line(p);
    return 1;
}

static int asb__yp_doc_marker(const asb__yp *p) {
    size_t i = p->line_start;
    if (i + 3 > p->n) return 0;
    if (!(memcmp(p->s + i, "---", 3) == 0 || memcmp(p->s + i, "...", 3) == 0)) return 0;
    return i + 3 == p->n || p->s[i + 3] == ' ' || p->s[i + 3] == '\n' || p->s[i + 3] == '\r' ||
           p->s[i + 3] == '\t';
}

/* Skips blank and comment-only lines. Returns the next content line's
   indentation with pos at the line start, or -1 at the end of input or at
   a document marker. Tabs may not indent. */
static int asb__yp_skip_blank(asb__yp *p) {
    while (p->pos < p->n) {
        size_t i = p->line_start;
        int ind = 0;
        p->pos = p->line_start;
        if (asb__yp_doc_marker(p)) return -1;
        while (i < p->n && p->s[i] == ' ') {
            i++;
            ind++;
        }
        {
            size_t j = i;
            while (j < p->n && (p->s[j] == ' ' || p->s[j] == '\t')) j++;
            if (j >= p->n || p->s[j] == '\n' || p->s[j] == '#' ||
                (p->s[j] == '\r' && (j + 1 >= p->n || p->s[j + 1] == '\n'))) {
                asb__yp_next_line(p);
                continue;
            }
            if (j != i) { /* a tab before content */
                p->pos = i;
                ASB__YFAIL(p, "tab character in indentation");
                return -2;
            }
        }
        return ind;
    }
    return -1;
}

/* -- scalars ------------------------------------------------------------------ */

static int asb__yp_put(asb__yp *p, const char *s, size_t n) {
    if (asb_buf_append(&p->tmp, s, n) != ASB_OK) {
        ASB__YFAIL(p, "out of memory");
        return 0;
    }
    return 1;
}

static int asb__yp_put_utf8(asb__yp *p, unsigned long cp) {
    char u[4];
    size_t k;
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    if (cp < 0x80) {
        u[0] = (char)cp;
        k = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xC0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3F));
        k = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[2] = (char)(0x80 | (cp & 0x3F));
        k = 3;
    } else if (cp <= 0x10FFFF) {
        u[0] = (char)(0xF0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        u[3] = (char)(0x80 | (cp & 0x3F));
        k = 4;
    } else {
        return 0;
    }
    return asb__yp_put(p, u, k);
}

/* A line break inside a quoted scalar folds: trailing blanks go, one break
   becomes a space, each further empty line a newline. */
static int asb__yp_fold_break(asb__yp *p) {
    int empties = 0;
    while (p->tmp.len && (p->tmp.ptr[p->tmp.len - 1] == ' ' || p->tmp.ptr[p->tmp.len - 1] == '\t'))
        p->tmp.len--;
    for (;;) {
        asb__yp_next_line(p);
        asb__yp_spaces(p);
        if (p->pos < p->n && asb__yp_eol(p)) {
            empties++;
            continue;
        }
        break;
    }
    if (p->pos >= p->n) return 0;
    if (p->line_start == p->pos - (p->pos - p->line_start) && asb__yp_doc_marker(p) &&
        p->pos - p->line_start < 3)
        return 0;
    if (empties == 0) return asb__yp_put(p, " ", 1);
    while (empties--)
        if (!asb__yp_put(p, "\n", 1)) return 0;
    return 1;
}

static asb_yaml_node *asb__yp_double(asb__yp *p) {
    int line = p->line, col = asb__yp_col(p);
    p->tmp.len = 0;
    p->pos++;
    for (;;) {
        unsigned char c;
        if (p->pos >= p->n) return asb__yp_fail(p, line, col, "unterminated double-quoted string");
        c = (unsigned char)p->s[p->pos];
        if (c == '"') {
            p->pos++;
            return asb__yp_scalar(p, line, col, 0);
        }
        if (c == '\n' || (c == '\r' && p->pos + 1 < p->n && p->s[p->pos + 1] == '\n')) {
            if (!asb__yp_fold_break(p))
                return asb__yp_fail(p, line, col, "unterminated double-quoted string");
            continue;
        }
        if (c == '\\') {
            unsigned char e = p->pos + 1 < p->n ? (unsigned char)p->s[p->pos + 1] : 0;
            const char *simple = NULL;
            int hex = 0;
            switch (e) {
            case '0': simple = "\0"; break;
            case 'a': simple = "\a"; break;
            case 'b': simple = "\b"; break;
            case 't': case '\t': simple = "\t"; break;
            case 'n': simple = "\n"; break;
            case 'v': simple = "\v"; break;
            case 'f': simple = "\f"; break;
            case 'r': simple = "\r"; break;
            case 'e': simple = "\x1b"; break;
            case ' ': simple = " "; break;
            case '"': simple = "\""; break;
            case '/': simple = "/"; break;
            case '\\': simple = "\\"; break;
            case 'N': simple = "\xc2\x85"; break;
            case '_': simple = "\xc2\xa0"; break;
            case 'L': simple = "\xe2\x80\xa8"; break;
            case 'P': simple = "\xe2\x80\xa9"; break;
            case 'x': hex = 2; break;
            case 'u': hex = 4; break;
            case 'U': hex = 8; break;
            case '\n': /* an escaped line break joins the lines */
                p->pos++;
                asb__yp_next_line(p);
                asb__yp_spaces(p);
                continue;
            default:
                return ASB__YFAIL(p, "unknown escape in a double-quoted string");
            }
            if (simple) {
                if (!asb__yp_put(p, simple, e == '0' ? 1 : strlen(simple))) return NULL;
                p->pos += 2;
            } else {
                unsigned long cp = 0;
                int k;
                for (k = 0; k < hex; k++) {
                    int v = p->pos + 2 + (size_t)k < p->n
                                ? asb__hexval((unsigned char)p->s[p->pos + 2 + (size_t)k])
                                : -1;
                    if (v < 0) return ASB__YFAIL(p, "bad hex escape in a double-quoted string");
                    cp = cp * 16 + (unsigned long)v;
                }
                if (!asb__yp_put_utf8(p, cp))
                    return ASB__YFAIL(p, "escape is not a Unicode scalar value");
                p->pos += 2 + (size_t)hex;
            }
            continue;
        }
        if (c < 0x20 && c != '\t') return ASB__YFAIL(p, "control character in a string");
        if (!asb__yp_put(p, p->s + p->pos, 1)) return NULL;
        p->pos++;
    }
}

static asb_yaml_node *asb__yp_single(asb__yp *p) {
    int line = p->line, col = asb__yp_col(p);
    p->tmp.len = 0;
    p->pos++;
    for (;;) {
        unsigned char c;
        if (p->pos >= p->n) return asb__yp_fail(p, line, col, "unterminated single-quoted string");
        c = (unsigned char)p->s[p->pos];
        if (c == '\'') {
            if (p->pos + 1 < p->n && p->s[p->pos + 1] == '\'') {
                if (!asb__yp_put(p, "'", 1)) return NULL;
                p->pos += 2;
                continue;
            }
            p->pos++;
            return asb__yp_scalar(p, line, col, 0);
        }
        if (c == '\n' || (c == '\r' && p->pos + 1 < p->n && p->s[p->pos + 1] == '\n')) {
            if (!asb__yp_fold_break(p))
                return asb__yp_fail(p, line, col, "unterminated single-quoted string");
            continue;
        }
        if (c < 0x20 && c != '\t') return ASB__YFAIL(p, "control character in a string");
        if (!asb__yp_put(p, p->s + p->pos, 1)) return NULL;
        p->pos++;
    }
}

/* A plain scalar to the end of its text on this line: it stops before
   ": " (or ':' at the end), before " #", and in flow context before
   , [ ] { }. Trailing blanks are not part of it. */
static size_t asb__yp_plain_end(const asb__yp *p, int flow) {
    size_t i = p->pos;
    while (i < p->n && p->s[i] != '\n') {
        char c = p->s[i];
        if (c == '\r' && (i + 1 >= p->n || p->s[i + 1] == '\n')) break;
        if (c == ':' && (i + 1 >= p->n || p->s[i + 1] == ' ' || p->s[i + 1] == '\t' ||
                         p->s[i + 1] == '\n' || p->s[i + 1] == '\r' ||
                         (flow && strchr(",[]{}", p->s[i + 1]))))
            break;
        if (c == '#' && i > p->pos && (p->s[i - 1] == ' ' || p->s[i - 1] == '\t')) break;
        if (flow && strchr(",[]{}", c)) break;
        i++;
    }
    while (i > p->pos && (p->s[i - 1] == ' ' || p->s[i - 1] == '\t')) i--;
    return i;
}

static int asb__yp_plain_start_ok(asb__yp *p) {
    char c = p->s[p->pos];
    if (c == '!') {
        ASB__YFAIL(p, "tags are not supported");
        return 0;
    }
    if (c == '&' || c == '*') {
        ASB__YFAIL(p, "anchors and aliases are read only before a value (after \"key:\", "
                      "\"- \" or in a flow collection), not here");
        return 0;
    }
    /* indicators that cannot begin a plain scalar */
    if (c == '@' || c == '`' || c == '%' || c == ']' || c == '}' || c == ',' || c == '#' ||
        c == '|' || c == '>' || c == '[' || c == '{' || c == '"' || c == '\'') {
        ASB__YFAIL(p, "a plain value cannot start with this character");
        return 0;
    }
    return 1;
}

/* -- anchors, aliases and merge keys ---------------------------------------------- */

/* The name after '&' or '*' (pos at the indicator): what go-yaml and
   PyYAML take, [0-9A-Za-z_-]+, ended by a blank, a line end or, in a flow
   collection, ',', ']' or '}'. */
static int asb__yp_anchor_name(asb__yp *p, const char **name, size_t *len) {
    size_t i = p->pos + 1;
    while (i < p->n && (asb__is_lower_alnum((unsigned char)p->s[i]) ||
                        (p->s[i] >= 'A' && p->s[i] <= 'Z') || p->s[i] == '_' || p->s[i] == '-'))
        i++;
    if (i == p->pos + 1) {
        ASB__YFAIL(p, p->s[p->pos] == '&' ? "an anchor needs a name" : "an alias needs a name");
        return 0;
    }
    if (i < p->n && !strchr(" \t\r\n,]}", p->s[i])) {
        p->pos = i;
        ASB__YFAIL(p, "anchor and alias names are letters, digits, '_' and '-'");
        return 0;
    }
    *name = p->s + p->pos + 1;
    *len = i - p->pos - 1;
    p->pos = i;
    return 1;
}

/* How many nodes a subtree stands for and how deep it goes, walking
   aliases' shared nodes as a reader would; stops once over `budget`. */
static long asb__yp_weigh(const asb_yaml_node *nd, long budget, int *depth) {
    long total = 1;
    int deepest = 0;
    const asb_yaml_node *ch;
    for (ch = nd->first; ch && total <= budget; ch = ch->next) {
        int d = 0;
        total += asb__yp_weigh(ch, budget - total, &d);
        if (d > deepest) deepest = d;
    }
    *depth = deepest + (nd->first ? 1 : 0);
    return total;
}

/* `*name`: a copy of the anchored node that shares its children (they
   are never changed once parsed), so an alias costs one node. */
static asb_yaml_node *asb__yp_alias(asb__yp *p) {
    int line = p->line, col = asb__yp_col(p), depth = 0;
    const char *name;
    size_t len;
    const asb__yanchor *a;
    asb_yaml_node *nd;
    long w;
    if (!asb__yp_anchor_name(p, &name, &len)) return NULL;
    for (a = p->anchors; a; a = a->prev)
        if (a->len == len && memcmp(a->name, name, len) == 0) break;
    if (!a) return asb__yp_fail(p, line, col, "alias to an anchor not defined before it");
    w = asb__yp_weigh(a->node, p->alias_budget, &depth);
    if (w > p->alias_budget)
        return asb__yp_fail(p, line, col, "too much aliasing (ASB_YAML_MAX_ALIAS_NODES)");
    if (p->depth + depth > ASB_YAML_MAX_DEPTH)
        return asb__yp_fail(p, line, col, "nesting too deep (through an alias)");
    p->alias_budget -= w;
    nd = asb__yp_node(p, a->node->type, line, col);
    if (!nd) return NULL;
    *nd = *a->node;
    nd->next = NULL;
    return nd;
}

/* Records `&name` for the node it stands before. */
static int asb__yp_anchor_set(asb__yp *p, const char *name, size_t len, int line, int col,
                              const asb_yaml_node *nd) {
    asb__yanchor *a;
    if (++p->nanchors > ASB_YAML_MAX_ANCHORS) {
        asb__yp_fail(p, line, col, "too many anchors (ASB_YAML_MAX_ANCHORS)");
        return 0;
    }
    a = (asb__yanchor *)asb__arena_alloc(p->arena, sizeof *a);
    if (!a) {
        asb__yp_fail(p, line, col, "out of memory");
        return 0;
    }
    a->prev = p->anchors;
    a->name = name;
    a->len = len;
    a->node = nd;
    p->anchors = a;
    return 1;
}

static int asb__yp_key_eq(const asb_yaml_node *a, const asb_yaml_node *b) {
    return a->len == b->len && memcmp(a->str, b->str, a->len) == 0;
}

/* The merge key (`<<: *base` or `<<: [*a, *b]`), as kubectl's go-yaml
   applies it: the pairs of the named maps join this one, an earlier map
   of a list winning over a later one, and keys written after `<<` over
   merged ones. A key written before `<<` that a merged map also sets is
   refused: go-yaml lets the merged value win there and the YAML spec the
   written one, and a guessed value is never returned. */
static int asb__yp_merge(asb__yp *p, asb_yaml_node *map) {
    asb_yaml_node *k, *prev = NULL, *mk = NULL, *mv = NULL, *last = NULL;
    const asb_yaml_node *src, *one;
    int nbefore = 0; /* pairs written before the << */
    for (k = map->first; k; prev = k->next, k = k->next->next, nbefore++)
        if (k->type == ASB_YAML_SCALAR && k->plain && k->len == 2 && memcmp(k->str, "<<", 2) == 0)
            break;
    if (!k) return 1;
    mk = k;
    mv = k->next;
    if (mv->type == ASB_YAML_MAP) {
        src = mv;
        one = mv;
    } else if (mv->type == ASB_YAML_SEQ) {
        src = mv->first;
        one = NULL;
        for (; src; src = src->next)
            if (src->type != ASB_YAML_MAP) break;
        if (src) {
            asb__yp_fail(p, src->line, src->col, "a merge (<<) list must hold maps only");
            return 0;
        }
        src = mv->first;
    } else {
        asb__yp_fail(p, mv->line, mv->col, "a merge (<<) needs a map or a list of maps");
        return 0;
    }
    /* unlink the "<<" pair */
    if (prev)
        prev->next = mv->next;
    else
        map->first = mv->next;
    map->count -= 2;
    for (last = map->first; last && last->next; last = last->next) {}
    for (; src; src = one ? NULL : src->next) {
        const asb_yaml_node *sk;
        for (sk = src->first; sk && sk->next; sk = sk->next->next) {
            asb_yaml_node *e, *nk, *nv;
            int found = 0, i = 0;
            for (e = map->first; e && e->next; e = e->next->next, i++)
                if (asb__yp_key_eq(e, sk)) {
                    found = 1;
                    break;
                }
            if (found && i < nbefore) {
                asb__yp_fail(p, e->line, e->col,
                             "a key written before a merge (<<) that sets it too: put it "
                             "after the <<");
                return 0;
            }
            if (found) continue; /* written after <<, or from an earlier map */
            if (p->alias_budget < 2) {
                asb__yp_fail(p, mk->line, mk->col, "too much aliasing (ASB_YAML_MAX_ALIAS_NODES)");
                return 0;
            }
            p->alias_budget -= 2;
            nk = asb__yp_node(p, sk->type, sk->line, sk->col);
            nv = asb__yp_node(p, sk->next->type, sk->next->line, sk->next->col);
            if (!nk || !nv) return 0;
            *nk = *sk;
            *nv = *sk->next;
            nk->next = NULL;
            nv->next = NULL;
            asb__yp_append(map, &last, nk);
            asb__yp_append(map, &last, nv);
        }
    }
    return 1;
}

/* -- flow collections -------------------------------------------------------------- */

/* Blanks, line breaks and comments between flow tokens. */
static void asb__yp_flow_ws(asb__yp *p) {
    for (;;) {
        asb__yp_spaces(p);
        if (p->pos >= p->n) return;
        if (p->s[p->pos] == '#' ) {
            while (p->pos < p->n && p->s[p->pos] != '\n') p->pos++;
            continue;
        }
        if (p->s[p->pos] == '\r') {
            p->pos++;
            continue;
        }
        if (p->s[p->pos] == '\n') {
            p->pos++;
            p->line++;
            p->line_start = p->pos;
            continue;
        }
        return;
    }
}

static asb_yaml_node *asb__yp_flow(asb__yp *p);

static asb_yaml_node *asb__yp_flow_scalar(asb__yp *p) {
    int line = p->line, col = asb__yp_col(p);
    size_t e;
    if (p->pos >= p->n) return ASB__YFAIL(p, "unexpected end inside a flow collection");
    if (p->s[p->pos] == '"') return asb__yp_double(p);
    if (p->s[p->pos] == '\'') return asb__yp_single(p);
    if (!asb__yp_plain_start_ok(p)) return NULL;
    /* "- " is a block entry, never plain text; go-yaml refuses it here */
    if (p->s[p->pos] == '-' &&
        (p->pos + 1 >= p->n || strchr(" \t\r\n", p->s[p->pos + 1])))
        return ASB__YFAIL(p, "a block sequence entry (\"- \") inside a flow collection");
    e = asb__yp_plain_end(p, 1);
    if (e == p->pos) return ASB__YFAIL(p, "expected a value");
    p->tmp.len = 0;
    if (!asb__yp_put(p, p->s + p->pos, e - p->pos)) return NULL;
    p->pos = e;
    return asb__yp_scalar(p, line, col, 1);
}

static asb_yaml_node *asb__yp_flow(asb__yp *p) {
    asb_yaml_node *nd, *last = NULL, *k, *v;
    int line, col, is_map;
    char close;
    asb__yp_flow_ws(p);
    if (p->pos >= p->n) return ASB__YFAIL(p, "unexpected end inside a flow collection");
    if (p->s[p->pos] == '*') return asb__yp_alias(p);
    if (p->s[p->pos] == '&') {
        int al = p->line, ac = asb__yp_col(p);
        const char *an;
        size_t alen;
        if (!asb__yp_anchor_name(p, &an, &alen)) return NULL;
        asb__yp_flow_ws(p);
        if (p->pos < p->n && (p->s[p->pos] == '&' || p->s[p->pos] == '*'))
            return ASB__YFAIL(p, "a node has one anchor at most, and an alias none");
        nd = asb__yp_flow(p);
        if (!nd || !asb__yp_anchor_set(p, an, alen, al, ac, nd)) return NULL;
        return nd;
    }
    if (p->s[p->pos] != '{' && p->s[p->pos] != '[') return asb__yp_flow_scalar(p);
    if (++p->depth > ASB_YAML_MAX_DEPTH) return ASB__YFAIL(p, "nesting too deep");
    line = p->line;
    col = asb__yp_col(p);
    is_map = p->s[p->pos] == '{';
    close = is_map ? '}' : ']';
    nd = asb__yp_node(p, is_map ? ASB_YAML_MAP : ASB_YAML_SEQ, line, col);
    if (!nd) return NULL;
    p->pos++;
    for (;;) {
        asb__yp_flow_ws(p);
        if (p->pos >= p->n) return asb__yp_fail(p, line, col, "unterminated flow collection");
        if (p->s[p->pos] == close) {
            p->pos++;
            break;
        }
        if (is_map) {
            const asb_yaml_node *d;
            int kl = p->line, kc = asb__yp_col(p);
            k = asb__yp_flow_scalar(p);
            if (!k) return NULL;
            for (d = nd->first; d; d = d->next ? d->next->next : NULL)
                if (d->len == k->len && memcmp(d->str, k->str, k->len) == 0)
                    return asb__yp_fail(p, kl, kc, "duplicate key");
            asb__yp_flow_ws(p);
            if (p->pos < p->n && p->s[p->pos] == ':') {
                p->pos++;
                asb__yp_flow_ws(p);
                if (p->pos < p->n && (p->s[p->pos] == ',' || p->s[p->pos] == '}'))
                    v = asb__yp_node(p, ASB_YAML_NULL, p->line, asb__yp_col(p));
                else
                    v = asb__yp_flow(p);
            } else if (p->pos < p->n && (p->s[p->pos] == ',' || p->s[p->pos] == '}')) {
                /* a key alone in a flow map: its value is null */
                v = asb__yp_node(p, ASB_YAML_NULL, p->line, asb__yp_col(p));
            } else {
                return ASB__YFAIL(p, "expected ':' after a key");
            }
            if (!v) return NULL;
            asb__yp_append(nd, &last, k);
            asb__yp_append(nd, &last, v);
        } else {
            v = asb__yp_flow(p);
            if (!v) return NULL;
            asb__yp_append(nd, &last, v);
        }
        asb__yp_flow_ws(p);
        if (p->pos < p->n && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->n && p->s[p->pos] == close) {
            p->pos++;
            break;
        }
        return ASB__YFAIL(p, is_map ? "expected ',' or '}'" : "expected ',' or ']'");
    }
    p->depth--;
    if (is_map && !asb__yp_merge(p, nd)) return NULL;
    return nd;
}

/* -- block collections ----------------------------------------------------------- */

static asb_yaml_node *asb__yp_at(asb__yp *p, int c, int parent);

/* A literal (|) or folded (>) block scalar; pos at the indicator. */
static asb_yaml_node *asb__yp_block_scalar(asb__yp *p, int parent) {
    int line = p->line, col = asb__yp_col(p), folded = p->s[p->pos] == '>';
    int chomp = 0, explicit_ind = 0, ind = -1, trailing = 0, k, prev_more = 0;
    int min_ind = parent < 0 ? 1 : parent + 1; /* content sits deeper */
    int last_had_break = 1, lead_max = 0;
    p->pos++;
    for (k = 0; k < 2 && p->pos < p->n; k++) {
        char c = p->s[p->pos];
        if ((c == '-' || c == '+') && !chomp) {
            chomp = c == '-' ? -1 : 1;
            p->pos++;
        } else if (c >= '1' && c <= '9' && !explicit_ind) {
            explicit_ind = c - '0';
            p->pos++;
        }
    }
    if (!asb__yp_end_line(p)) return NULL;
    if (explicit_ind) ind = (parent < 0 ? 0 : parent) + explicit_ind;
    p->tmp.len = 0;
    for (;;) {
        size_t i = p->line_start, e;
        int sp = 0, blank;
        if (p->pos >= p->n) break;
        while (i < p->n && p->s[i] == ' ') {
            i++;
            sp++;
        }
        blank = i >= p->n || p->s[i] == '\n' ||
                (p->s[i] == '\r' && (i + 1 >= p->n || p->s[i + 1] == '\n'));
        /* a line of spaces is empty, unless it has more spaces than the
           content's indentation: then the extra spaces are content */
        if (blank && (ind < 0 || sp <= ind)) {
            /* an empty line: counted, emitted if text follows; one
               without a line break (the end of the file) adds nothing */
            size_t j = i;
            while (j < p->n && p->s[j] != '\n') j++;
            if (j < p->n) trailing++;
            if (ind < 0 && sp > lead_max) lead_max = sp;
            p->pos = i;
            asb__yp_next_line(p);
            continue;
        }
        if (ind < 0) {
            if (sp < min_ind) break;
            if (lead_max > sp)
                return ASB__YFAIL(p, "a leading blank line is indented more than the text");
            ind = sp;
        }
        if (sp < ind) break;
        if (asb__yp_doc_marker(p) && sp == 0) break;
        e = i;
        while (e < p->n && p->s[e] != '\n') e++;
        last_had_break = e < p->n;
        if (e > i && p->s[e - 1] == '\r') e--;
        if (p->tmp.len || trailing) {
            /* join with the previous line; more-indented lines keep the
               breaks around them */
            int more = sp > ind || prev_more;
            if (p->tmp.len) {
                if (!folded || more || trailing)
                    k = asb__yp_put(p, "\n", 1);
                else
                    k = asb__yp_put(p, " ", 1);
                if (!k) return NULL;
                if (folded && trailing && !more) trailing--;
            }
        }
        while (trailing > 0) {
            if (!asb__yp_put(p, "\n", 1)) return NULL;
            trailing--;
        }
        prev_more = sp > ind;
        if (!asb__yp_put(p, p->s + p->line_start + ind, e - (p->line_start + (size_t)ind)))
            return NULL;
        p->pos = e;
        asb__yp_next_line(p);
    }
    /* chomping: strip none, clip one, keep all trailing newlines (a last
       line without a break at the end of the file gets none) */
    if (p->tmp.len > 0 && chomp >= 0 && last_had_break) {
        if (!asb__yp_put(p, "\n", 1)) return NULL;
        if (chomp > 0)
            while (trailing-- > 0)
                if (!asb__yp_put(p, "\n", 1)) return NULL;
    } else if (p->tmp.len == 0 && chomp > 0) {
        /* keep with only empty lines: their breaks are the value */
        while (trailing-- > 0)
            if (!asb__yp_put(p, "\n", 1)) return NULL;
    }
    if (p->pos < p->n) p->pos = p->line_start;
    return asb__yp_scalar(p, line, col, 0);
}

/* A value after "key:" or "- " when the rest of the line is empty: the
   next, more indented block, or (for a key) a sequence at the key's own
   indentation, or null. */
static asb_yaml_node *asb__yp_block_below(asb__yp *p, int c, int allow_same_seq) {
    int line = p->line, col = asb__yp_col(p);
    int n = asb__yp_skip_blank(p);
    if (n == -2) return NULL;
    if (n >= 0 && n > c) {
        p->pos = p->line_start + (size_t)n;
        return asb__yp_at(p, n, c);
    }
    if (n >= 0 && n == c && allow_same_seq) {
        size_t i = p->line_start + (size_t)n;
        if (p->s[i] == '-' && (i + 1 >= p->n || p->s[i + 1] == ' ' || p->s[i + 1] == '\n' ||
                               p->s[i + 1] == '\r')) {
            p->pos = i;
            return asb__yp_at(p, n, c - 1);
        }
    }
    return asb__yp_node(p, ASB_YAML_NULL, line, col);
}

/* A plain scalar value that may continue on more indented lines. */
static asb_yaml_node *asb__yp_plain_value(asb__yp *p, int parent) {
    int line = p->line, col = asb__yp_col(p), last_line;
    size_t e;
    int commented;
    if (!asb__yp_plain_start_ok(p)) return NULL;
    e = asb__yp_plain_end(p, 0);
    p->tmp.len = 0;
    if (!asb__yp_put(p, p->s + p->pos, e - p->pos)) return NULL;
    p->pos = e;
    if (p->pos < p->n && p->s[p->pos] == ':' && !asb__yp_eol(p))
        return ASB__YFAIL(p, "a mapping value is not allowed here");
    asb__yp_spaces(p);
    commented = p->pos < p->n && p->s[p->pos] == '#';
    if (!asb__yp_end_line(p)) return NULL;
    last_line = line;
    for (;;) {
        int n = asb__yp_skip_blank(p), gap;
        size_t ce;
        if (n == -2) return NULL;
        if (n < 0 || n <= parent) break;
        p->pos = p->line_start + (size_t)n;
        /* a comment ends a plain scalar: nothing may continue it */
        if (commented) return ASB__YFAIL(p, "unexpected content after a comment");
        ce = asb__yp_plain_end(p, 0);
        if (ce < p->n && p->s[ce] == ':')
            return ASB__YFAIL(p, "a key inside a multi-line value (bad indentation?)");
        /* no start check here: a continuation line is any plain text
           ("{u", ">-", "@x"), as in YAML's ns-plain-char and go-yaml */
        /* one line break folds to a space; each blank line between is a
           newline */
        gap = p->line - last_line - 1;
        if (gap <= 0) {
            if (!asb__yp_put(p, " ", 1)) return NULL;
        } else {
            while (gap-- > 0)
                if (!asb__yp_put(p, "\n", 1)) return NULL;
        }
        if (!asb__yp_put(p, p->s + p->pos, ce - p->pos)) return NULL;
        last_line = p->line;
        p->pos = ce;
        asb__yp_spaces(p);
        commented = p->pos < p->n && p->s[p->pos] == '#';
        if (!asb__yp_end_line(p)) return NULL;
    }
    if (p->pos < p->n) p->pos = p->line_start;
    return asb__yp_scalar(p, line, col, 1);
}

/* The value after a key's ':' (pos just past it); the map's indent is c. */
static asb_yaml_node *asb__yp_value(asb__yp *p, int c) {
    asb_yaml_node *v;
    char ch;
    asb__yp_spaces(p);
    if (asb__yp_eol(p) || p->s[p->pos] == '#') {
        asb__yp_next_line(p);
        return asb__yp_block_below(p, c, 1);
    }
    ch = p->s[p->pos];
    if (ch == '*') {
        v = asb__yp_alias(p);
        if (!v || !asb__yp_end_line(p)) return NULL;
        return v;
    }
    if (ch == '&') {
        int al = p->line, ac = asb__yp_col(p);
        const char *an;
        size_t alen;
        if (!asb__yp_anchor_name(p, &an, &alen)) return NULL;
        asb__yp_spaces(p);
        if (!asb__yp_eol(p) && (p->s[p->pos] == '&' || p->s[p->pos] == '*'))
            return ASB__YFAIL(p, "a node has one anchor at most, and an alias none");
        v = asb__yp_value(p, c);
        if (!v || !asb__yp_anchor_set(p, an, alen, al, ac, v)) return NULL;
        return v;
    }
    if (ch == '|' || ch == '>') return asb__yp_block_scalar(p, c);
    if (ch == '[' || ch == '{') {
        v = asb__yp_flow(p);
        if (!v || !asb__yp_end_line(p)) return NULL;
        return v;
    }
    if (ch == '"' || ch == '\'') {
        int l0 = p->line;
        v = ch == '"' ? asb__yp_double(p) : asb__yp_single(p);
        if (!v) return NULL;
        (void)l0;
        if (!asb__yp_end_line(p)) return NULL;
        return v;
    }
    if (ch == '-' && p->pos + 1 < p->n && (p->s[p->pos + 1] == ' ' || p->s[p->pos + 1] == '\t'))
        return ASB__YFAIL(p, "a block sequence cannot start on its key's line");
    return asb__yp_plain_value(p, c);
}

/* Reads a key at pos (quoted or plain) and the ':' after it. */
static asb_yaml_node *asb__yp_key(asb__yp *p) {
    int line = p->line, col = asb__yp_col(p);
    asb_yaml_node *k;
    if (p->s[p->pos] == '"' || p->s[p->pos] == '\'') {
        k = p->s[p->pos] == '"' ? asb__yp_double(p) : asb__yp_single(p);
        if (!k) return NULL;
        if (k->line != p->line) return asb__yp_fail(p, line, col, "a key must fit on one line");
        asb__yp_spaces(p);
    } else {
        size_t e;
        if (p->s[p->pos] == '?') return ASB__YFAIL(p, "complex keys (?) are not supported");
        if (!asb__yp_plain_start_ok(p)) return NULL;
        e = asb__yp_plain_end(p, 0);
        if (e == p->pos) return ASB__YFAIL(p, "a key is missing before ':'");
        p->tmp.len = 0;
        if (!asb__yp_put(p, p->s + p->pos, e - p->pos)) return NULL;
        p->pos = e;
        asb__yp_spaces(p);
        k = asb__yp_scalar(p, line, col, 1);
        if (!k) return NULL;
    }
    if (p->pos >= p->n || p->s[p->pos] != ':' ||
        !(p->pos + 1 >= p->n || p->s[p->pos + 1] == ' ' || p->s[p->pos + 1] == '\t' ||
          p->s[p->pos + 1] == '\n' || p->s[p->pos + 1] == '\r'))
        return asb__yp_fail(p, line, col, "expected \"key: value\"");
    p->pos++;
    return k;
}

static asb_yaml_node *asb__yp_map(asb__yp *p, int c, asb_yaml_node *first_key) {
    asb_yaml_node *map = asb__yp_node(p, ASB_YAML_MAP, first_key->line, first_key->col);
    asb_yaml_node *last = NULL, *k = first_key;
    if (!map) return NULL;
    for (;;) {
        const asb_yaml_node *d;
        asb_yaml_node *v;
        int n;
        for (d = map->first; d; d = d->next ? d->next->next : NULL)
            if (d->len == k->len && memcmp(d->str, k->str, k->len) == 0)
                return asb__yp_fail(p, k->line, k->col, "duplicate key");
        v = asb__yp_value(p, c);
        if (!v) return NULL;
        asb__yp_append(map, &last, k);
        asb__yp_append(map, &last, v);
        n = asb__yp_skip_blank(p);
        if (n == -2) return NULL;
        if (n < 0 || n < c) break;
        p->pos = p->line_start + (size_t)n;
        if (n > c) return ASB__YFAIL(p, "bad indentation (deeper than the keys before it)");
        if (p->s[p->pos] == '-' && (p->pos + 1 >= p->n || p->s[p->pos + 1] == ' '))
            break; /* a sequence at this indent belongs to an outer key */
        k = asb__yp_key(p);
        if (!k) return NULL;
    }
    if (p->pos < p->n) p->pos = p->line_start;
    if (!asb__yp_merge(p, map)) return NULL;
    return map;
}

static asb_yaml_node *asb__yp_seq(asb__yp *p, int c) {
    asb_yaml_node *seq = asb__yp_node(p, ASB_YAML_SEQ, p->line, asb__yp_col(p));
    asb_yaml_node *last = NULL;
    if (!seq) return NULL;
    for (;;) {
        asb_yaml_node *item;
        int n;
        p->pos++; /* the '-' */
        asb__yp_spaces(p);
        if (!asb__yp_eol(p) && p->s[p->pos] == '*') {
            item = asb__yp_alias(p);
            if (item && !asb__yp_end_line(p)) item = NULL;
        } else if (!asb__yp_eol(p) && p->s[p->pos] == '&') {
            int al = p->line, ac = asb__yp_col(p);
            const char *an;
            size_t alen;
            if (!asb__yp_anchor_name(p, &an, &alen)) return NULL;
            asb__yp_spaces(p);
            if (asb__yp_eol(p) || p->s[p->pos] == '#') {
                asb__yp_next_line(p);
                item = asb__yp_block_below(p, c, 0);
            } else if (p->s[p->pos] == '&' || p->s[p->pos] == '*') {
                return ASB__YFAIL(p, "a node has one anchor at most, and an alias none");
            } else {
                char first = p->s[p->pos];
                item = asb__yp_at(p, asb__yp_col(p) - 1, c);
                /* "- &a key: v" anchors the key, not the map (YAML's
                   rule, easy to misread): refused rather than guessed */
                if (item && first != '[' && first != '{' && item->line == al &&
                    (item->type == ASB_YAML_MAP || item->type == ASB_YAML_SEQ))
                    return asb__yp_fail(p, al, ac,
                                        "an anchor before a key on the same line names the "
                                        "key, not the map: put the anchor alone on the "
                                        "\"- \" line");
            }
            if (item && !asb__yp_anchor_set(p, an, alen, al, ac, item)) return NULL;
        } else if (asb__yp_eol(p) || p->s[p->pos] == '#') {
            asb__yp_next_line(p);
            item = asb__yp_block_below(p, c, 0);
        } else {
            item = asb__yp_at(p, asb__yp_col(p) - 1, c);
        }
        if (!item) return NULL;
        asb__yp_append(seq, &last, item);
        n = asb__yp_skip_blank(p);
        if (n == -2) return NULL;
        if (n < 0 || n < c) break;
        p->pos = p->line_start + (size_t)n;
        if (n > c) return ASB__YFAIL(p, "bad indentation in a sequence");
        if (!(p->s[p->pos] == '-' &&
              (p->pos + 1 >= p->n || p->s[p->pos + 1] == ' ' || p->s[p->pos + 1] == '\n' ||
               p->s[p->pos + 1] == '\r')))
            break;
    }
    if (p->pos < p->n) p->pos = p->line_start;
    return seq;
}

/* A node whose content starts at pos, column c (0-based); `parent` is the
   enclosing block's indentation. Leaves pos at a line start. */
static asb_yaml_node *asb__yp_at(asb__yp *p, int c, int parent) {
    asb_yaml_node *nd;
    char ch = p->s[p->pos];
    if (++p->depth > ASB_YAML_MAX_DEPTH) return ASB__YFAIL(p, "nesting too deep");
    if (ch == '?' && (p->pos + 1 >= p->n || p->s[p->pos + 1] == ' ' || p->s[p->pos + 1] == '\n'))
        return ASB__YFAIL(p, "complex keys (?) are not supported");
    if (ch == '-' && (p->pos + 1 >= p->n || p->s[p->pos + 1] == ' ' || p->s[p->pos + 1] == '\t' ||
                      p->s[p->pos + 1] == '\n' || p->s[p->pos + 1] == '\r')) {
        nd = asb__yp_seq(p, c);
    } else if (ch == '[' || ch == '{') {
        nd = asb__yp_flow(p);
        if (nd && !asb__yp_end_line(p)) nd = NULL;
    } else if (ch == '|' || ch == '>') {
        nd = asb__yp_block_scalar(p, parent);
    } else {
        /* a key (then a map) or a lone scalar */
        size_t save = p->pos;
        int line = p->line;
        int is_key = 0;
        if (ch == '"' || ch == '\'') {
            asb_yaml_node *q = ch == '"' ? asb__yp_double(p) : asb__yp_single(p);
            if (!q) return NULL;
            asb__yp_spaces(p);
            is_key = p->line == line && p->pos < p->n && p->s[p->pos] == ':';
            if (!is_key) {
                p->depth--;
                if (!asb__yp_end_line(p)) return NULL;
                return q;
            }
        } else {
            size_t e = asb__yp_plain_end(p, 0);
            while (e < p->n && (p->s[e] == ' ' || p->s[e] == '\t')) e++;
            is_key = e < p->n && p->s[e] == ':';
            if (!is_key) {
                p->depth--;
                return asb__yp_plain_value(p, parent);
            }
        }
        p->pos = save;
        p->line = line;
        {
            asb_yaml_node *k = asb__yp_key(p);
            if (!k) return NULL;
            nd = asb__yp_map(p, c, k);
        }
    }
    p->depth--;
    return nd;
}

ASB_API asb_result asb_yaml_parse(asb_yaml_doc *doc, const char *text, size_t len,
                                  const char *name, const asb_allocator *alloc,
                                  asb_error *err) {
    asb__yp p;
    asb__arena *arena;
    int n;
    size_t i;
    if (!doc) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "yaml: NULL doc");
    memset(doc, 0, sizeof *doc);
    if (!text && len) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "yaml: NULL text");
    if (asb__allocator_resolve(alloc, &doc->alloc_) != ASB_OK)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "allocator: give all three functions or none");
    memset(&p, 0, sizeof p);
    p.s = text ? text : "";
    p.n = len;
    p.line = 1;
    p.name = name ? name : "<yaml>";
    p.err = err;
    p.alias_budget = ASB_YAML_MAX_ALIAS_NODES;
    /* NUL cannot appear in YAML text; say where */
    for (i = 0; i < len; i++) {
        if (text[i] == '\n') {
            p.line++;
            p.line_start = i + 1;
        } else if (((unsigned char)text[i] < 0x20 && text[i] != '\t' && text[i] != '\r') ||
                   text[i] == 0x7f) {
            /* as go-yaml (kubectl): control characters are refused even
               inside quotes; escapes are the way to write them */
            p.pos = i;
            ASB__YFAIL(&p, text[i] ? "control character in the text" : "NUL byte in the text");
            return ASB_ERR_KUBECONFIG;
        }
    }
    p.line = 1;
    p.line_start = 0;
    if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) p.pos = p.line_start = 3;
    arena = asb__arena_new(&doc->alloc_);
    if (!arena) return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "yaml: out of memory");
    doc->arena_ = arena;
    p.arena = arena;
    asb_buf_init(&p.tmp, &doc->alloc_);
    p.tmp.wipe = 1; /* scalars of a kubeconfig: tokens, keys */
    n = asb__yp_skip_blank(&p);
    if (n == -1 && p.pos < p.n && p.s[p.line_start] == '.') {
        ASB__YFAIL(&p, "a document end marker without a document");
        asb_buf_free(&p.tmp);
        asb_yaml_free(doc);
        return ASB_ERR_KUBECONFIG;
    }
    if (n == -1 && p.pos < p.n && p.s[p.line_start] == '-') {
        /* "---": the document starts; content may follow on the line */
        p.pos = p.line_start + 3;
        asb__yp_spaces(&p);
        if (asb__yp_eol(&p) || p.s[p.pos] == '#') {
            asb__yp_next_line(&p);
            n = asb__yp_skip_blank(&p);
        } else {
            n = 0;
            doc->root = asb__yp_value(&p, -1);
            goto after;
        }
    }
    if (n >= 0) {
        p.pos = p.line_start + (size_t)n;
        doc->root = asb__yp_at(&p, n, -1);
    } else if (n == -1) {
        doc->root = asb__yp_node(&p, ASB_YAML_NULL, 1, 1);
    }
after:
    if (!p.failed) {
        n = asb__yp_skip_blank(&p);
        if (n == -1 && p.pos < p.n && p.s[p.line_start] == '.') {
            asb__yp_next_line(&p);
            n = asb__yp_skip_blank(&p);
        }
        if (n == -1 && p.pos < p.n)
            ASB__YFAIL(&p, "several documents in one file are not supported");
        else if (n >= 0) {
            p.pos = p.line_start + (size_t)n;
            ASB__YFAIL(&p, "unexpected content (bad indentation?)");
        }
    }
    asb_buf_free(&p.tmp);
    if (p.failed || !doc->root) {
        if (!p.failed) asb__fail(err, ASB_ERR_KUBECONFIG, "%s: cannot be read", p.name);
        asb_yaml_free(doc);
        return ASB_ERR_KUBECONFIG;
    }
    return ASB_OK;
}

ASB_API void asb_yaml_free(asb_yaml_doc *doc) {
    if (!doc || !doc->arena_) return;
    /* wiped: a YAML document here is a kubeconfig, with its tokens and keys */
    asb__arena_destroy((asb__arena *)doc->arena_, 1);
    doc->arena_ = NULL;
    doc->root = NULL;
}

ASB_API const asb_yaml_node *asb_yaml_get(const asb_yaml_node *map, const char *key) {
    const asb_yaml_node *k;
    size_t n;
    if (!map || map->type != ASB_YAML_MAP || !key) return NULL;
    n = strlen(key);
    for (k = map->first; k && k->next; k = k->next->next)
        if (k->len == n && memcmp(k->str, key, n) == 0) return k->next;
    return NULL;
}

ASB_API int asb_yaml_is_null(const asb_yaml_node *node) {
    return !node || node->type == ASB_YAML_NULL;
}

ASB_API asb_result asb_yaml_bool(const asb_yaml_node *node, int *out) {
    static const char *yes[] = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"};
    static const char *no[] = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"};
    size_t i;
    if (!node || node->type != ASB_YAML_SCALAR || !node->plain) return ASB_ERR_INVALID_ARGUMENT;
    for (i = 0; i < 9; i++) {
        if (strcmp(node->str, yes[i]) == 0) {
            *out = 1;
            return ASB_OK;
        }
        if (strcmp(node->str, no[i]) == 0) {
            *out = 0;
            return ASB_OK;
        }
    }
    return ASB_ERR_INVALID_ARGUMENT;
}

/* >>kubeconfig ==============================================================
   Loading, merging (kubectl's rules) and resolving a context. */

typedef struct asb__kc {
    asb__arena *arena;
    asb_allocator alloc;
    asb_error *err;
    /* the files, in merge order */
    int nfiles;
    char *paths[32];
    char *texts[32];
    size_t text_lens[32];
    asb_yaml_doc docs[32];
} asb__kc;

static asb_result asb__kc_fail_at(asb__kc *k, int file, const asb_yaml_node *n,
                                  const char *what) {
    char nq[200];
    asb__quote(nq, sizeof nq, k->paths[file], strlen(k->paths[file]), 180);
    return asb__fail(k->err, ASB_ERR_KUBECONFIG, "%s:%d:%d: %s", nq, n ? n->line : 1,
                     n ? n->col : 1, what);
}

static char *asb__kc_dup(asb__kc *k, const char *s, size_t n) {
    char *p = (char *)asb__arena_alloc(k->arena, n + 1);
    if (p) {
        if (n) memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

/* Reads a whole file (bounded) into an allocated, NUL-terminated buffer. */
static asb_result asb__read_file(const asb_allocator *a, const char *path, char **out,
                                 size_t *len, size_t max) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    asb_buf b;
    asb_result r = ASB_OK;
    *out = NULL;
    *len = 0;
    if (fd < 0) return ASB_ERR_IO;
    asb_buf_init(&b, a);
    b.wipe = 1; /* kubeconfigs, token and key files: no copy left behind */
    /* Read straight into the buffer: no stack copy of a secret to wipe,
       and no 16 KiB frame on a small thread stack. One byte more than
       max is asked for, so a file of exactly max bytes is still whole. */
    for (;;) {
        size_t want = 16384;
        ssize_t n;
        if (want > max + 1 - b.len) want = max + 1 - b.len;
        if (asb_buf_reserve(&b, want) != ASB_OK) {
            r = ASB_ERR_OUT_OF_MEMORY;
            break;
        }
        n = read(fd, b.ptr + b.len, want);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            r = ASB_ERR_IO;
            break;
        }
        if (n == 0) break;
        if (b.len + (size_t)n > max) {
            r = ASB_ERR_TOO_LARGE;
            break;
        }
        b.len += (size_t)n;
    }
    close(fd);
    if (r == ASB_OK && asb_buf_reserve(&b, 0) != ASB_OK) r = ASB_ERR_OUT_OF_MEMORY;
    if (r != ASB_OK) {
        asb_buf_free(&b);
        return r;
    }
    b.ptr[b.len] = '\0';
    *out = b.ptr;
    *len = b.len;
    return ASB_OK;
}

/* A scalar field as an arena string; NULL when absent or null. A value of
   the wrong kind is an error (bad set). */
static const char *asb__kc_str(asb__kc *k, int file, const asb_yaml_node *map,
                               const char *key, int *bad) {
    const asb_yaml_node *v = asb_yaml_get(map, key);
    char m[120];
    if (*bad || asb_yaml_is_null(v)) return NULL;
    if (v->type != ASB_YAML_SCALAR) {
        snprintf(m, sizeof m, "\"%s\" must be a string", key);
        asb__kc_fail_at(k, file, v, m);
        *bad = 1;
        return NULL;
    }
    {
        const char *s = asb__kc_dup(k, v->str, v->len);
        if (!s) {
            asb__fail(k->err, ASB_ERR_OUT_OF_MEMORY, "kubeconfig: out of memory");
            *bad = 1;
        }
        return s;
    }
}

static int asb__kc_bool(asb__kc *k, int file, const asb_yaml_node *map, const char *key,
                        int *bad) {
    const asb_yaml_node *v = asb_yaml_get(map, key);
    int b = 0;
    char m[120];
    if (*bad || asb_yaml_is_null(v)) return 0;
    if (asb_yaml_bool(v, &b) != ASB_OK) {
        snprintf(m, sizeof m, "\"%s\" must be true or false", key);
        asb__kc_fail_at(k, file, v, m);
        *bad = 1;
    }
    return b;
}

/* Finds the stanza `name` in list `list` ("clusters", ...) across the files:
   the first file to define it wins, whole. Sets *file. */
static const asb_yaml_node *asb__kc_find(asb__kc *k, const char *list, const char *item,
                                         const char *name, size_t name_len, int *file,
                                         int *bad) {
    int f;
    for (f = 0; f < k->nfiles; f++) {
        const asb_yaml_node *seq = asb_yaml_get(k->docs[f].root, list), *it;
        if (asb_yaml_is_null(seq)) continue;
        if (seq->type != ASB_YAML_SEQ) {
            char m[120];
            snprintf(m, sizeof m, "\"%s\" must be a list", list);
            asb__kc_fail_at(k, f, seq, m);
            *bad = 1;
            return NULL;
        }
        for (it = seq->first; it; it = it->next) {
            const asb_yaml_node *nm;
            if (it->type != ASB_YAML_MAP) {
                char m[120];
                snprintf(m, sizeof m, "each entry of \"%s\" must be a map", list);
                asb__kc_fail_at(k, f, it, m);
                *bad = 1;
                return NULL;
            }
            nm = asb_yaml_get(it, "name");
            /* by length: a quoted "ctx\0x" is not the context "ctx" */
            if (nm && nm->type == ASB_YAML_SCALAR && nm->len == name_len &&
                memcmp(nm->str, name, name_len) == 0) {
                const asb_yaml_node *body = asb_yaml_get(it, item);
                if (body && body->type != ASB_YAML_MAP && body->type != ASB_YAML_NULL) {
                    char m[120];
                    snprintf(m, sizeof m, "\"%s\" must be a map", item);
                    asb__kc_fail_at(k, f, body, m);
                    *bad = 1;
                    return NULL;
                }
                *file = f;
                return body ? body : it; /* an empty stanza: no fields */
            }
        }
    }
    return NULL;
}

/* Relative paths inside a kubeconfig are relative to its directory. */
static const char *asb__kc_path(asb__kc *k, int file, const char *p) {
    const char *f = k->paths[file], *slash;
    char cwd[4096];
    size_t dl;
    char *out;
    if (!p || !*p || p[0] == '/') return p;
    slash = strrchr(f, '/');
    if (slash) {
        dl = (size_t)(slash - f);
        out = (char *)asb__arena_alloc(k->arena, dl + strlen(p) + 2);
        if (!out) return NULL;
        memcpy(out, f, dl);
        out[dl] = '/';
        strcpy(out + dl + 1, p);
        if (out[0] == '/') return out;
        f = out; /* still relative: prefix the working directory below */
        p = out;
    }
    if (!getcwd(cwd, sizeof cwd)) return p;
    out = (char *)asb__arena_alloc(k->arena, strlen(cwd) + strlen(p) + 2);
    if (!out) return NULL;
    sprintf(out, "%s/%s", cwd, p);
    (void)f;
    return out;
}

/* `*-data` (base64) wins over the file path; either gives the bytes. */
static asb_result asb__kc_bytes(asb__kc *k, int file, const asb_yaml_node *map,
                                const char *data_key, const char *path_key, const char **out,
                                size_t *out_len, int *bad) {
    const asb_yaml_node *d = asb_yaml_get(map, data_key);
    const char *path;
    *out = NULL;
    *out_len = 0;
    if (*bad) return ASB_ERR_KUBECONFIG;
    if (!asb_yaml_is_null(d)) {
        asb_buf b;
        char m[160];
        if (d->type != ASB_YAML_SCALAR) {
            snprintf(m, sizeof m, "\"%s\" must be a base64 string", data_key);
            *bad = 1;
            return asb__kc_fail_at(k, file, d, m);
        }
        asb_buf_init(&b, &k->alloc);
        b.wipe = 1; /* client-key-data decodes to the key */
        if (asb_base64_decode(d->str, d->len, &b, NULL) != ASB_OK) {
            asb_buf_free(&b);
            snprintf(m, sizeof m, "\"%s\" is not valid base64", data_key);
            *bad = 1;
            return asb__kc_fail_at(k, file, d, m);
        }
        *out = asb__kc_dup(k, b.ptr ? b.ptr : "", b.len);
        *out_len = b.len;
        asb_buf_free(&b);
        return ASB_OK;
    }
    path = asb__kc_path(k, file, asb__kc_str(k, file, map, path_key, bad));
    if (path) {
        char *text = NULL;
        size_t len = 0;
        asb_result r = asb__read_file(&k->alloc, path, &text, &len, (size_t)16 << 20);
        if (r != ASB_OK) {
            char pq[200], m[400];
            asb__quote(pq, sizeof pq, path, strlen(path), 180);
            snprintf(m, sizeof m, "%s \"%s\": %s", path_key, pq,
                     r == ASB_ERR_IO ? strerror(errno) : "file too large");
            *bad = 1;
            return asb__kc_fail_at(k, file, asb_yaml_get(map, path_key), m);
        }
        *out = asb__kc_dup(k, text, len);
        *out_len = len;
        asb__free_secret(&k->alloc, text, len); /* it may be a key */
    }
    return *bad ? ASB_ERR_KUBECONFIG : ASB_OK;
}

static asb_result asb__kc_exec(asb__kc *k, int file, const asb_yaml_node *ex,
                               asb_kube_config *cfg, int *bad) {
    asb_kube_exec *e = (asb_kube_exec *)asb__arena_alloc(k->arena, sizeof *e);
    const asb_yaml_node *args = asb_yaml_get(ex, "args"), *env = asb_yaml_get(ex, "env"), *it;
    const char *cmd;
    if (!e) return asb__fail(k->err, ASB_ERR_OUT_OF_MEMORY, "kubeconfig: out of memory");
    memset(e, 0, sizeof *e);
    if (ex->type != ASB_YAML_MAP) {
        *bad = 1;
        return asb__kc_fail_at(k, file, ex, "\"exec\" must be a map");
    }
    cmd = asb__kc_str(k, file, ex, "command", bad);
    if (!*bad && !cmd) {
        *bad = 1;
        return asb__kc_fail_at(k, file, ex, "exec: \"command\" is required");
    }
    e->command = cmd && strchr(cmd, '/') ? asb__kc_path(k, file, cmd) : cmd;
    e->api_version = asb__kc_str(k, file, ex, "apiVersion", bad);
    e->install_hint = asb__kc_str(k, file, ex, "installHint", bad);
    e->interactive_mode = asb__kc_str(k, file, ex, "interactiveMode", bad);
    e->provide_cluster_info = asb__kc_bool(k, file, ex, "provideClusterInfo", bad);
    /* v1beta1 leaves interactiveMode optional, meaning IfAvailable */
    if (!e->interactive_mode && e->api_version &&
        strcmp(e->api_version, "client.authentication.k8s.io/v1beta1") == 0)
        e->interactive_mode = "IfAvailable";
    if (!asb_yaml_is_null(args)) {
        const char **a;
        size_t i = 0;
        if (args->type != ASB_YAML_SEQ) {
            *bad = 1;
            return asb__kc_fail_at(k, file, args, "exec: \"args\" must be a list");
        }
        a = (const char **)asb__arena_alloc(k->arena, sizeof(char *) * ((size_t)args->count + 1));
        if (!a) return asb__fail(k->err, ASB_ERR_OUT_OF_MEMORY, "kubeconfig: out of memory");
        for (it = args->first; it; it = it->next) {
            if (it->type != ASB_YAML_SCALAR && it->type != ASB_YAML_NULL) {
                *bad = 1;
                return asb__kc_fail_at(k, file, it, "exec: each argument must be a string");
            }
            a[i++] = asb__kc_dup(k, it->str, it->len);
        }
        a[i] = NULL;
        e->args = a;
        e->arg_count = i;
    }
    if (!asb_yaml_is_null(env)) {
        const char **names, **values;
        size_t i = 0;
        if (env->type != ASB_YAML_SEQ) {
            *bad = 1;
            return asb__kc_fail_at(k, file, env, "exec: \"env\" must be a list");
        }
        names = (const char **)asb__arena_alloc(k->arena, sizeof(char *) * ((size_t)env->count + 1));
        values = (const char **)asb__arena_alloc(k->arena, sizeof(char *) * ((size_t)env->count + 1));
        if (!names || !values)
            return asb__fail(k->err, ASB_ERR_OUT_OF_MEMORY, "kubeconfig: out of memory");
        for (it = env->first; it; it = it->next) {
            const char *nm, *val;
            if (it->type != ASB_YAML_MAP) {
                *bad = 1;
                return asb__kc_fail_at(k, file, it, "exec: each env entry must be {name, value}");
            }
            nm = asb__kc_str(k, file, it, "name", bad);
            val = asb__kc_str(k, file, it, "value", bad);
            if (*bad) return ASB_ERR_KUBECONFIG;
            if (!nm) {
                *bad = 1;
                return asb__kc_fail_at(k, file, it, "exec: an env entry has no name");
            }
            names[i] = nm;
            values[i] = val ? val : "";
            i++;
        }
        e->env_names = names;
        e->env_values = values;
        e->env_count = i;
    }
    cfg->exec = e;
    return *bad ? ASB_ERR_KUBECONFIG : ASB_OK;
}

/* Every file's outline, as kubectl checks it when it reads the file:
   the three lists are lists of maps with a name, current-context a string.
   A broken file fails even when the chosen context would not touch it. */
static asb_result asb__kc_check_shape(asb__kc *k, int f) {
    static const char *lists[3] = {"clusters", "users", "contexts"};
    const asb_yaml_node *root = k->docs[f].root, *cc;
    int i;
    if (root->type != ASB_YAML_MAP) return ASB_OK;
    cc = asb_yaml_get(root, "current-context");
    if (cc && cc->type != ASB_YAML_SCALAR && cc->type != ASB_YAML_NULL)
        return asb__kc_fail_at(k, f, cc, "\"current-context\" must be a string");
    for (i = 0; i < 3; i++) {
        const asb_yaml_node *seq = asb_yaml_get(root, lists[i]), *it;
        char m[120];
        if (asb_yaml_is_null(seq)) continue;
        if (seq->type != ASB_YAML_SEQ) {
            snprintf(m, sizeof m, "\"%s\" must be a list", lists[i]);
            return asb__kc_fail_at(k, f, seq, m);
        }
        for (it = seq->first; it; it = it->next) {
            const asb_yaml_node *nm = asb_yaml_get(it, "name");
            if (it->type != ASB_YAML_MAP) {
                snprintf(m, sizeof m, "each entry of \"%s\" must be a map", lists[i]);
                return asb__kc_fail_at(k, f, it, m);
            }
            if (nm && nm->type != ASB_YAML_SCALAR && nm->type != ASB_YAML_NULL)
                return asb__kc_fail_at(k, f, nm, "\"name\" must be a string");
        }
    }
    return ASB_OK;
}

/* One file of a merge list: duplicates and missing files are skipped,
   as kubectl does. */
static asb_result asb__kc_add_file(asb__kc *k, const char *p, size_t n, const char *what) {
    int dup = 0, i;
    char *path;
    if (n == 0) return ASB_OK;
    path = asb__kc_dup(k, p, n);
    if (!path) return asb__fail(k->err, ASB_ERR_OUT_OF_MEMORY, "out of memory");
    for (i = 0; i < k->nfiles; i++)
        if (strcmp(k->paths[i], path) == 0) dup = 1;
    if (!dup && access(path, R_OK) == 0) {
        if (k->nfiles == 32)
            return asb__fail(k->err, ASB_ERR_KUBECONFIG, "%s lists more than 32 files", what);
        k->paths[k->nfiles++] = path;
    }
    return ASB_OK;
}

/* The list of files: explicit, else KUBECONFIG, else ~/.kube/config. */
static asb_result asb__kc_files(asb__kc *k, const asb_kubeconfig_desc *d) {
    const char *list = d->path || d->path_count ? NULL : getenv("KUBECONFIG");
    char home_cfg[4096];
    const char *p;
    if (d->path && d->path_count)
        return asb__fail(k->err, ASB_ERR_INVALID_ARGUMENT,
                         "kubeconfig: give path or paths, not both");
    if (d->path_count) {
        size_t i;
        if (!d->paths) return asb__fail(k->err, ASB_ERR_INVALID_ARGUMENT, "kubeconfig: paths is NULL");
        for (i = 0; i < d->path_count; i++) {
            asb_result r;
            if (!d->paths[i])
                return asb__fail(k->err, ASB_ERR_INVALID_ARGUMENT, "kubeconfig: paths[%zu] is NULL", i);
            r = asb__kc_add_file(k, d->paths[i], strlen(d->paths[i]), "kubeconfig paths");
            if (r != ASB_OK) return r;
        }
        if (k->nfiles == 0)
            return asb__fail(k->err, ASB_ERR_KUBECONFIG,
                             "no kubeconfig: none of the %zu files in paths exists", d->path_count);
        return ASB_OK;
    }
    if (d->path) {
        k->paths[0] = asb__kc_dup(k, d->path, strlen(d->path));
        k->nfiles = 1;
        if (access(d->path, R_OK) != 0) {
            char q[200];
            asb__quote(q, sizeof q, d->path, strlen(d->path), 180);
            return asb__fail(k->err, ASB_ERR_KUBECONFIG, "kubeconfig \"%s\": %s", q,
                             strerror(errno));
        }
        return ASB_OK;
    }
    if (!list || !*list) {
        const char *home = getenv("HOME");
        if (!home || !*home)
            return asb__fail(k->err, ASB_ERR_KUBECONFIG,
                             "no kubeconfig: KUBECONFIG and HOME are both unset");
        snprintf(home_cfg, sizeof home_cfg, "%s/.kube/config", home);
        if (access(home_cfg, R_OK) != 0)
            return asb__fail(k->err, ASB_ERR_KUBECONFIG,
                             "no kubeconfig: %s: %s (set KUBECONFIG or pass a path)", home_cfg,
                             strerror(errno));
        k->paths[0] = asb__kc_dup(k, home_cfg, strlen(home_cfg));
        k->nfiles = 1;
        return ASB_OK;
    }
    for (p = list; *p;) {
        const char *e = strchr(p, ':');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        asb_result r = asb__kc_add_file(k, p, n, "KUBECONFIG");
        if (r != ASB_OK) return r;
        p += n;
        if (*p == ':') p++;
    }
    if (k->nfiles == 0)
        return asb__fail(k->err, ASB_ERR_KUBECONFIG,
                         "no kubeconfig: none of the files in KUBECONFIG exists");
    return ASB_OK;
}

ASB_API asb_result asb_kubeconfig_load(const asb_kubeconfig_desc *desc,
                                       asb_kube_config *out, asb_error *err) {
    asb_kubeconfig_desc zero;
    asb__kc k;
    asb_result r;
    int f, bad = 0, cf = 0, clf = 0, uf = 0, ccf = -1;
    const char *ctx_name = NULL;
    const asb_yaml_node *ctx, *cl, *us = NULL;
    if (!out) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "kubeconfig: NULL out");
    memset(out, 0, sizeof *out);
    if (!desc) {
        memset(&zero, 0, sizeof zero);
        desc = &zero;
    }
    memset(&k, 0, sizeof k);
    k.err = err;
    if (asb__allocator_resolve(desc->allocator, &k.alloc) != ASB_OK)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "allocator: give all three functions or none");
    k.arena = asb__arena_new(&k.alloc);
    if (!k.arena) return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "kubeconfig: out of memory");
    out->arena_ = k.arena;
    out->alloc_ = k.alloc;
    r = asb__kc_files(&k, desc);
    for (f = 0; r == ASB_OK && f < k.nfiles; f++) {
        size_t len = 0;
        r = asb__read_file(&k.alloc, k.paths[f], &k.texts[f], &len, (size_t)16 << 20);
        k.text_lens[f] = len;
        if (r != ASB_OK) {
            char q[200];
            asb__quote(q, sizeof q, k.paths[f], strlen(k.paths[f]), 180);
            r = asb__fail(err, ASB_ERR_KUBECONFIG, "kubeconfig \"%s\": %s", q,
                          r == ASB_ERR_IO ? strerror(errno) : "too large");
            break;
        }
        r = asb_yaml_parse(&k.docs[f], k.texts[f], len, k.paths[f], &k.alloc, err);
        if (r == ASB_OK && k.docs[f].root->type != ASB_YAML_MAP &&
            k.docs[f].root->type != ASB_YAML_NULL)
            r = asb__kc_fail_at(&k, f, k.docs[f].root, "a kubeconfig must be a map");
        if (r == ASB_OK) r = asb__kc_check_shape(&k, f);
    }
    if (r != ASB_OK) goto done;
    /* the context: asked for, else the first file's current-context */
    ctx_name = desc->context;
    for (f = 0; !ctx_name && f < k.nfiles; f++) {
        const char *cc = asb__kc_str(&k, f, k.docs[f].root, "current-context", &bad);
        if (bad) {
            r = ASB_ERR_KUBECONFIG;
            goto done;
        }
        if (cc && *cc) {
            ctx_name = cc;
            ccf = f;
        }
    }
    if (!ctx_name) {
        r = asb__fail(err, ASB_ERR_KUBECONFIG,
                      "kubeconfig: no current-context is set and no context was given");
        goto done;
    }
    out->context = asb__kc_dup(&k, ctx_name, strlen(ctx_name));
    ctx = asb__kc_find(&k, "contexts", "context", ctx_name,
                       ccf >= 0 ? asb_yaml_get(k.docs[ccf].root, "current-context")->len
                                : strlen(ctx_name),
                       &cf, &bad);
    if (bad) {
        r = ASB_ERR_KUBECONFIG;
        goto done;
    }
    if (!ctx) {
        /* say who asked for it and where it was looked for */
        char q[120], files[300];
        size_t fl = 0;
        asb__quote(q, sizeof q, ctx_name, strlen(ctx_name), 100);
        files[0] = '\0';
        for (f = 0; f < k.nfiles && fl + 4 < sizeof files; f++) {
            char fq[200];
            int n;
            asb__quote(fq, sizeof fq, k.paths[f], strlen(k.paths[f]), 120);
            n = snprintf(files + fl, sizeof files - fl, "%s\"%s\"", f ? ", " : "", fq);
            if (n < 0) break;
            fl += (size_t)n < sizeof files - fl ? (size_t)n : sizeof files - fl - 1;
        }
        if (ccf >= 0) {
            const asb_yaml_node *cn = asb_yaml_get(k.docs[ccf].root, "current-context");
            char m[ASB_ERROR_MESSAGE_SIZE];
            snprintf(m, sizeof m, "current-context \"%s\" names a context that none of %.300s defines",
                     q, files);
            r = asb__kc_fail_at(&k, ccf, cn, m);
        } else {
            r = asb__fail(err, ASB_ERR_KUBECONFIG,
                          "kubeconfig: context \"%s\" (asked for by the caller) not found in %.300s",
                          q, files);
        }
        goto done;
    }
    out->cluster = asb__kc_str(&k, cf, ctx, "cluster", &bad);
    out->user = asb__kc_str(&k, cf, ctx, "user", &bad);
    out->default_namespace = asb__kc_str(&k, cf, ctx, "namespace", &bad);
    if (!out->default_namespace || !*out->default_namespace) out->default_namespace = "default";
    if (bad) {
        r = ASB_ERR_KUBECONFIG;
        goto done;
    }
    if (!out->cluster || !*out->cluster) {
        r = asb__kc_fail_at(&k, cf, ctx, "the context names no cluster");
        goto done;
    }
    cl = asb__kc_find(&k, "clusters", "cluster", out->cluster, asb_yaml_get(ctx, "cluster")->len,
                      &clf, &bad);
    if (!bad && !cl) {
        /* at the context's line, in the file that defined the context */
        char q[120], cq[120], m[300];
        asb__quote(q, sizeof q, out->cluster, strlen(out->cluster), 100);
        asb__quote(cq, sizeof cq, ctx_name, strlen(ctx_name), 100);
        snprintf(m, sizeof m, "cluster \"%s\" of context \"%s\" is not defined in any file", q,
                 cq);
        r = asb__kc_fail_at(&k, cf, asb_yaml_get(ctx, "cluster"), m);
        goto done;
    }
    if (!bad) {
        out->server = asb__kc_str(&k, clf, cl, "server", &bad);
        out->tls_server_name = asb__kc_str(&k, clf, cl, "tls-server-name", &bad);
        out->proxy_url = asb__kc_str(&k, clf, cl, "proxy-url", &bad);
        out->insecure_skip_tls_verify = asb__kc_bool(&k, clf, cl, "insecure-skip-tls-verify", &bad);
        asb__kc_bytes(&k, clf, cl, "certificate-authority-data", "certificate-authority",
                      &out->ca, &out->ca_len, &bad);
    }
    if (!bad && (!out->server || !*out->server)) {
        r = asb__kc_fail_at(&k, clf, cl, "the cluster has no server");
        goto done;
    }
    if (!bad && out->user && *out->user) {
        us = asb__kc_find(&k, "users", "user", out->user, asb_yaml_get(ctx, "user")->len, &uf,
                          &bad);
        if (!bad && !us) {
            char q[120], cq[120], m[300];
            asb__quote(q, sizeof q, out->user, strlen(out->user), 100);
            asb__quote(cq, sizeof cq, ctx_name, strlen(ctx_name), 100);
            snprintf(m, sizeof m, "user \"%s\" of context \"%s\" is not defined in any file", q,
                     cq);
            r = asb__kc_fail_at(&k, cf, asb_yaml_get(ctx, "user"), m);
            goto done;
        }
    }
    if (!bad && us) {
        const asb_yaml_node *ex = asb_yaml_get(us, "exec"), *ap = asb_yaml_get(us, "auth-provider");
        out->user_origin = k.paths[uf];
        asb__kc_bytes(&k, uf, us, "client-certificate-data", "client-certificate",
                      &out->client_cert, &out->client_cert_len, &bad);
        asb__kc_bytes(&k, uf, us, "client-key-data", "client-key", &out->client_key,
                      &out->client_key_len, &bad);
        out->token = asb__kc_str(&k, uf, us, "token", &bad);
        out->token_file = asb__kc_path(&k, uf, asb__kc_str(&k, uf, us, "tokenFile", &bad));
        out->username = asb__kc_str(&k, uf, us, "username", &bad);
        out->password = asb__kc_str(&k, uf, us, "password", &bad);
        if (!bad && !asb_yaml_is_null(ex)) asb__kc_exec(&k, uf, ex, out, &bad);
        if (!bad && !asb_yaml_is_null(ap))
            out->auth_provider = ap->type == ASB_YAML_MAP
                                     ? asb__kc_str(&k, uf, ap, "name", &bad)
                                     : "(unnamed)";
        if (out->token && !*out->token) out->token = NULL;
        if (!bad && (out->client_cert != NULL) != (out->client_key != NULL)) {
            r = asb__kc_fail_at(&k, uf, us,
                                "the user has a client certificate without its key, or a key "
                                "without its certificate");
            goto done;
        }
    }
    if (bad) {
        r = ASB_ERR_KUBECONFIG;
        goto done;
    }
    r = ASB_OK;
done:
    for (f = 0; f < k.nfiles; f++) {
        asb_yaml_free(&k.docs[f]);
        /* tokens, keys; by length: a NUL in the text (refused by the
           parser) must not end the wipe early */
        asb__free_secret(&k.alloc, k.texts[f], k.text_lens[f]);
    }
    if (r != ASB_OK) {
        if (err && err->code == ASB_OK) err->code = r;
        asb_kube_config_free(out);
    }
    return r;
}

ASB_API void asb_kube_config_free(asb_kube_config *cfg) {
    if (!cfg || !cfg->arena_) return;
    asb__arena_destroy((asb__arena *)cfg->arena_, 1); /* tokens, keys */
    memset(cfg, 0, sizeof *cfg);
}

ASB_API void asb_kube_config_tls(const asb_kube_config *cfg, asb_tls_config *tls) {
    memset(tls, 0, sizeof *tls);
    if (!cfg) return;
    tls->ca_data = cfg->ca;
    tls->ca_data_len = cfg->ca_len;
    tls->client_cert_data = cfg->client_cert;
    tls->client_cert_data_len = cfg->client_cert_len;
    tls->client_key_data = cfg->client_key;
    tls->client_key_data_len = cfg->client_key_len;
    tls->server_name = cfg->tls_server_name;
    tls->insecure_skip_verify = cfg->insecure_skip_tls_verify;
}

/* >>http ====================================================================
   URLs, the response parser (a push parser, independent of any socket, so
   it can be fuzzed and fed any chunking), connections, TLS, the pool and
   the request loop with retries. */

static int asb__ascii_lower(int c) {
    return c >= 'A' && c <= 'Z' ? c + 32 : c;
}

static int asb__ieq(const char *a, size_t alen, const char *b) {
    size_t i;
    for (i = 0; i < alen; i++) {
        if (!b[i] || asb__ascii_lower((unsigned char)a[i]) !=
                         asb__ascii_lower((unsigned char)b[i]))
            return 0;
    }
    return b[alen] == '\0';
}

ASB_API asb_result asb_url_parse(const char *url, size_t len, asb_url *out,
                                 asb_error *err) {
    size_t i = 0, hs, he, k;
    char q[96];
    unsigned char ip[16];
    if (!url || !out)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "url: NULL argument");
    memset(out, 0, sizeof *out);
    asb__quote(q, sizeof q, url, len, 64);
    for (k = 0; k < len; k++) {
        unsigned char c = (unsigned char)url[k];
        if (c <= 0x20 || c == 0x7f)
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                             "url \"%s\": contains a space or control character",
                             q);
    }
    if (len >= 7 && asb__ieq(url, 7, "http://") ) {
        i = 7;
        out->port = 80;
    } else if (len >= 8 && asb__ieq(url, 8, "https://")) {
        i = 8;
        out->port = 443;
        out->is_https = 1;
    } else {
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "url \"%s\": only http:// and https:// are supported", q);
    }
    out->scheme.ptr = url;
    out->scheme.len = i - 3;
    hs = i;
    while (i < len && url[i] != '/' && url[i] != '?' && url[i] != '#') i++;
    he = i;
    if (memchr(url + hs, '@', he - hs))
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "url \"%s\": user info in URLs is not supported", q);
    if (hs < he && url[hs] == '[') {
        const char *rb = (const char *)memchr(url + hs, ']', he - hs);
        if (!rb)
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                             "url \"%s\": unterminated IPv6 literal", q);
        out->host.ptr = url + hs + 1;
        out->host.len = (size_t)(rb - (url + hs + 1));
        if (asb__ip_literal(out->host.ptr, out->host.len, ip) != 6)
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                             "url \"%s\": bad IPv6 literal", q);
        out->host_is_ip = 6;
        k = (size_t)(rb - url) + 1;
    } else {
        k = hs;
        while (k < he && url[k] != ':') k++;
        out->host.ptr = url + hs;
        out->host.len = k - hs;
        for (i = hs; i < k; i++) {
            unsigned char c = (unsigned char)url[i];
            if (!asb__is_alnum(c) && c != '-' && c != '.' && c != '_')
                return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                                 "url \"%s\": bad character in host", q);
        }
        if (asb__ip_literal(out->host.ptr, out->host.len, ip) == 4)
            out->host_is_ip = 4;
    }
    if (out->host.len == 0 || out->host.len > 253)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "url \"%s\": missing or overlong host", q);
    if (k < he) {
        long port = 0;
        if (url[k] != ':' || k + 1 == he)
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "url \"%s\": bad port", q);
        for (i = k + 1; i < he; i++) {
            if (url[i] < '0' || url[i] > '9' || port > 65535)
                return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                                 "url \"%s\": bad port", q);
            port = port * 10 + (url[i] - '0');
        }
        if (port < 1 || port > 65535)
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                             "url \"%s\": port out of range", q);
        out->port = (int)port;
    }
    i = he;
    k = i;
    while (k < len && url[k] != '#') k++;
    out->target.ptr = url + i;
    out->target.len = k - i;
    return ASB_OK;
}

/* -- response parser -------------------------------------------------------- */

enum {
    ASB__HP_HEAD = 0,    /* status line and headers */
    ASB__HP_BODY_LEN,    /* Content-Length body */
    ASB__HP_CHUNK_SIZE,  /* a chunk-size line */
    ASB__HP_CHUNK_DATA,
    ASB__HP_CHUNK_CRLF,  /* the CRLF after chunk data */
    ASB__HP_TRAILERS,
    ASB__HP_BODY_EOF,    /* body until the connection closes */
    ASB__HP_DONE
};

/* Where body bytes go. */
typedef asb_result (*asb__body_sink)(void *ctx, const char *p, size_t n);

typedef struct asb__http_parser {
    int state;
    int head_method;        /* request was HEAD: no body whatever it says */
    size_t max_head;
    int max_headers;
    asb_buf head;           /* raw status line and headers */
    size_t line_start;      /* start of the line being collected in head */
    int status;
    int minor;              /* HTTP/1.x */
    int keep_alive;
    int chunked;
    int has_length;
    uint64_t length;
    uint64_t remaining;
    size_t trailer_bytes;
    char line[80];          /* the CRLF after chunk data, trailer line ends */
    size_t line_len;
    int cs_phase;           /* where in a chunk-size line (asb__hp_feed) */
    int cs_digits;          /* its hex digits so far */
    uint64_t cs_size;       /* and their value */
    int header_count;
    asb__body_sink sink;
    void *sink_ctx;
    const char *error;      /* static description of a protocol error */
} asb__http_parser;

static void asb__hp_init(asb__http_parser *p, int head_method, size_t max_head,
                         int max_headers, const asb_allocator *alloc) {
    memset(p, 0, sizeof *p);
    p->head_method = head_method;
    p->max_head = max_head;
    p->max_headers = max_headers;
    asb_buf_init(&p->head, alloc);
}

static void asb__hp_free(asb__http_parser *p) { asb_buf_free(&p->head); }

static int asb__is_tchar(unsigned char c) {
    return asb__is_alnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* Interprets the complete header block in p->head (lines end in LF, CR
   optional). Called once the blank line arrived. */
static asb_result asb__hp_parse_head(asb__http_parser *p) {
    char *s = p->head.ptr, *end = s + p->head.len, *line, *nl;
    int n = 0, te_seen = 0, conn_close = 0, conn_keep = 0;
    /* status line: HTTP/1.x SP 3DIGIT [SP reason] */
    nl = (char *)memchr(s, '\n', (size_t)(end - s));
    if (!nl || nl - s < 12 || memcmp(s, "HTTP/1.", 7) != 0 ||
        (s[7] != '0' && s[7] != '1') || s[8] != ' ' || s[9] < '1' || s[9] > '5' ||
        s[10] < '0' || s[10] > '9' || s[11] < '0' || s[11] > '9' ||
        (nl - s > 12 && s[12] != ' ' && s[12] != '\r')) {
        p->error = "malformed status line";
        return ASB_ERR_HTTP_PROTOCOL;
    }
    p->minor = s[7] - '0';
    p->status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
    for (line = s; line < nl; line++)
        if ((unsigned char)*line < 0x20 && *line != '\t' &&
            !(*line == '\r' && line + 1 == nl)) {
            p->error = "control character in status line";
            return ASB_ERR_HTTP_PROTOCOL;
        }
    p->has_length = 0;
    p->chunked = 0;
    for (line = nl + 1; line < end; line = nl + 1) {
        char *colon, *v, *ve;
        nl = (char *)memchr(line, '\n', (size_t)(end - line));
        if (!nl) break;
        ve = nl;
        if (ve > line && ve[-1] == '\r') ve--;
        if (ve == line) break; /* the blank line */
        if (++n > p->max_headers) {
            p->error = "too many header lines";
            return ASB_ERR_TOO_LARGE;
        }
        if (*line == ' ' || *line == '\t') {
            p->error = "obsolete header line folding";
            return ASB_ERR_HTTP_PROTOCOL;
        }
        colon = (char *)memchr(line, ':', (size_t)(ve - line));
        if (!colon || colon == line) {
            p->error = "header line without a name";
            return ASB_ERR_HTTP_PROTOCOL;
        }
        for (v = line; v < colon; v++)
            if (!asb__is_tchar((unsigned char)*v)) {
                p->error = "bad character in a header name";
                return ASB_ERR_HTTP_PROTOCOL;
            }
        v = colon + 1;
        while (v < ve && (*v == ' ' || *v == '\t')) v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
        {
            char *c;
            for (c = v; c < ve; c++)
                if (((unsigned char)*c < 0x20 && *c != '\t') || *c == 0x7f) {
                    p->error = "control character in a header value";
                    return ASB_ERR_HTTP_PROTOCOL;
                }
        }
        if (asb__ieq(line, (size_t)(colon - line), "content-length")) {
            uint64_t l = 0;
            char *c;
            if (v == ve) {
                p->error = "empty Content-Length";
                return ASB_ERR_HTTP_PROTOCOL;
            }
            for (c = v; c < ve; c++) {
                if (*c < '0' || *c > '9' || l > (UINT64_MAX - 9) / 10) {
                    p->error = "bad Content-Length";
                    return ASB_ERR_HTTP_PROTOCOL;
                }
                l = l * 10 + (uint64_t)(*c - '0');
            }
            if (p->has_length && l != p->length) {
                p->error = "conflicting Content-Length headers";
                return ASB_ERR_HTTP_PROTOCOL;
            }
            p->has_length = 1;
            p->length = l;
        } else if (asb__ieq(line, (size_t)(colon - line), "transfer-encoding")) {
            /* only "chunked" (the last and only coding we can undo), once:
               a second line would mean chunked twice, and decoding once
               would hand the inner framing over as data */
            if (te_seen) {
                p->error = "more than one Transfer-Encoding header";
                return ASB_ERR_HTTP_PROTOCOL;
            }
            te_seen = 1;
            if ((size_t)(ve - v) == 7 && asb__ieq(v, 7, "chunked"))
                p->chunked = 1;
            else {
                p->error = "unsupported Transfer-Encoding";
                return ASB_ERR_HTTP_PROTOCOL;
            }
        } else if (asb__ieq(line, (size_t)(colon - line), "connection")) {
            char *t = v;
            while (t < ve) { /* a comma-separated list of options */
                char *te = t;
                while (te < ve && *te != ',') te++;
                {
                    char *a = t, *b = te;
                    while (a < b && (*a == ' ' || *a == '\t')) a++;
                    while (b > a && (b[-1] == ' ' || b[-1] == '\t')) b--;
                    if (asb__ieq(a, (size_t)(b - a), "close")) conn_close = 1;
                    if (asb__ieq(a, (size_t)(b - a), "keep-alive")) conn_keep = 1;
                }
                t = te + 1;
            }
        }
    }
    p->header_count = n;
    p->keep_alive = p->minor == 1 ? !conn_close : conn_keep && !conn_close;
    if (te_seen && p->has_length) {
        /* RFC 9112 §6.3: chunked wins, and the connection is suspect */
        p->has_length = 0;
        p->keep_alive = 0;
    }
    return ASB_OK;
}

/* Decides how the body is framed once the head is known. */
static void asb__hp_start_body(asb__http_parser *p) {
    if (p->head_method || p->status == 204 || p->status == 304 ||
        (p->status >= 100 && p->status < 200)) {
        p->state = ASB__HP_DONE;
    } else if (p->chunked) {
        p->state = ASB__HP_CHUNK_SIZE;
        p->line_len = 0;
    } else if (p->has_length) {
        p->remaining = p->length;
        p->state = p->length ? ASB__HP_BODY_LEN : ASB__HP_DONE;
    } else {
        p->state = ASB__HP_BODY_EOF;
        p->keep_alive = 0;
    }
}

/* Feeds bytes; returns ASB_OK (more may come or DONE reached: check
   p->state) and sets *used to what it consumed, which is less than len only
   at DONE (the rest belongs to no response of ours). */
static asb_result asb__hp_feed(asb__http_parser *p, const char *data, size_t len,
                               size_t *used) {
    size_t i = 0;
    asb_result r;
    while (i < len && p->state != ASB__HP_DONE) {
        switch (p->state) {
        case ASB__HP_HEAD: {
            /* collect until a blank line; look for LF in what arrived */
            const char *nl = (const char *)memchr(data + i, '\n', len - i);
            size_t take = nl ? (size_t)(nl - (data + i)) + 1 : len - i;
            if (p->head.len + take > p->max_head) {
                p->error = "header block larger than the limit";
                return ASB_ERR_TOO_LARGE;
            }
            if (asb_buf_append(&p->head, data + i, take) != ASB_OK)
                return ASB_ERR_OUT_OF_MEMORY;
            i += take;
            if (!nl) break;
            {
                size_t ll = p->head.len - p->line_start;
                const char *l = p->head.ptr + p->line_start;
                int blank = ll == 1 || (ll == 2 && l[0] == '\r');
                p->line_start = p->head.len;
                if (!blank) break;
                if (p->head.len <= 2) { /* tolerate a stray empty line first */
                    p->head.len = 0;
                    p->line_start = 0;
                    break;
                }
            }
            r = asb__hp_parse_head(p);
            if (r != ASB_OK) return r;
            if (p->status >= 100 && p->status < 200 && p->status != 101) {
                /* an interim response (100 Continue): the real one follows */
                p->head.len = 0;
                p->line_start = 0;
                break;
            }
            asb__hp_start_body(p);
            break;
        }
        case ASB__HP_BODY_LEN:
        case ASB__HP_CHUNK_DATA: {
            size_t n = len - i;
            if ((uint64_t)n > p->remaining) n = (size_t)p->remaining;
            r = p->sink ? p->sink(p->sink_ctx, data + i, n) : ASB_OK;
            if (r != ASB_OK) return r;
            i += n;
            p->remaining -= n;
            if (p->remaining == 0) {
                if (p->state == ASB__HP_BODY_LEN) {
                    p->state = ASB__HP_DONE;
                } else {
                    p->state = ASB__HP_CHUNK_CRLF;
                    p->line_len = 0;
                }
            }
            break;
        }
        case ASB__HP_CHUNK_CRLF: {
            char c = data[i++];
            if (c == '\r' && p->line_len == 0) {
                p->line_len = 1;
            } else if (c == '\n') {
                p->state = ASB__HP_CHUNK_SIZE;
                p->line_len = 0;
            } else {
                p->error = "missing CRLF after chunk data";
                return ASB_ERR_HTTP_PROTOCOL;
            }
            break;
        }
        case ASB__HP_CHUNK_SIZE: {
            /* chunk-size [BWS] *(";" chunk-ext) [CR] LF (RFC 9112 7.1),
               judged byte by byte over the whole line however long it is
               (the extensions are read and dropped, never kept), and the
               line bounded by max_head: no prefix is trusted for the rest */
            unsigned char c = (unsigned char)data[i++];
            int hv = asb__hexval(c), eol = 0, bad = 0;
            if (++p->trailer_bytes > p->max_head) {
                p->error = "chunk-size line too long";
                return ASB_ERR_HTTP_PROTOCOL;
            }
            if (p->cs_phase == 0) { /* the size's hex digits */
                if (hv >= 0) {
                    if (++p->cs_digits > 15) {
                        p->error = "chunk size too large";
                        return ASB_ERR_HTTP_PROTOCOL;
                    }
                    p->cs_size = p->cs_size * 16 + (uint64_t)hv;
                    break;
                }
                if (p->cs_digits == 0) {
                    p->error = "invalid chunk size";
                    return ASB_ERR_HTTP_PROTOCOL;
                }
                p->cs_phase = 1; /* this byte is the first after the digits */
            }
            switch (p->cs_phase) {
            case 1: /* whitespace before an extension or the line end */
                if (c == ';') p->cs_phase = 2;
                else if (c == '\r') p->cs_phase = 5;
                else if (c == '\n') eol = 1;
                else if (c != ' ' && c != '\t') bad = 1;
                break;
            case 2: /* name[=value], unquoted parts */
                if (c == '"') p->cs_phase = 3;
                else if (c == '\r') p->cs_phase = 5;
                else if (c == '\n') eol = 1;
                else if (!asb__is_tchar(c) && c != '=' && c != ';' && c != ' ' && c != '\t')
                    bad = 1;
                break;
            case 3: /* a quoted-string value */
                if (c == '"') p->cs_phase = 2;
                else if (c == '\\') p->cs_phase = 4;
                else if ((c < 0x20 && c != '\t') || c == 0x7f) bad = 1;
                break;
            case 4: /* the byte after a backslash in quotes */
                if ((c < 0x20 && c != '\t') || c == 0x7f) bad = 1;
                else p->cs_phase = 3;
                break;
            default: /* 5: a CR, which only the LF may follow */
                if (c == '\n') eol = 1;
                else bad = 1;
                break;
            }
            if (bad) {
                p->error = "invalid chunk size";
                return ASB_ERR_HTTP_PROTOCOL;
            }
            if (!eol) break;
            p->trailer_bytes = 0;
            p->line_len = 0;
            if (p->cs_size == 0) {
                p->state = ASB__HP_TRAILERS;
            } else {
                p->remaining = p->cs_size;
                p->state = ASB__HP_CHUNK_DATA;
            }
            p->cs_phase = 0;
            p->cs_digits = 0;
            p->cs_size = 0;
            break;
        }
        case ASB__HP_TRAILERS: {
            /* trailer fields are read and ignored until the blank line */
            char c = data[i++];
            if (++p->trailer_bytes > p->max_head) {
                p->error = "trailer block larger than the limit";
                return ASB_ERR_TOO_LARGE;
            }
            if (c == '\n') {
                if (p->line_len == 0 || (p->line_len == 1 && p->line[0] == '\r'))
                    p->state = ASB__HP_DONE;
                p->line_len = 0;
            } else if (p->line_len < 2) {
                p->line[p->line_len++] = c;
            } else {
                p->line_len = 2;
            }
            break;
        }
        case ASB__HP_BODY_EOF: {
            r = p->sink ? p->sink(p->sink_ctx, data + i, len - i) : ASB_OK;
            if (r != ASB_OK) return r;
            i = len;
            break;
        }
        default:
            break;
        }
    }
    *used = i;
    return ASB_OK;
}

/* The connection closed: fine only where the framing says the body ends
   there. */
static asb_result asb__hp_eof(asb__http_parser *p) {
    if (p->state == ASB__HP_BODY_EOF) {
        p->state = ASB__HP_DONE;
        return ASB_OK;
    }
    if (p->state == ASB__HP_DONE) return ASB_OK;
    if (p->state == ASB__HP_BODY_LEN) {
        p->error = "connection closed before Content-Length bytes arrived";
        return ASB_ERR_HTTP_SHORT_BODY;
    }
    p->error = p->state == ASB__HP_HEAD ? "connection closed before a complete response"
                                        : "connection closed inside a chunked body";
    return p->state == ASB__HP_HEAD ? ASB_ERR_RECV : ASB_ERR_HTTP_SHORT_BODY;
}

/* -- clock and sleep --------------------------------------------------------- */

static int64_t asb__now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void asb__sleep_ms(int64_t ms) {
    struct timespec ts;
    if (ms <= 0) return;
    ts.tv_sec = (time_t)(ms / 1000);
    ts.tv_nsec = (long)(ms % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {}
}

/* -- cancel tokens --------------------------------------------------------------- */

/* A pipe: triggering writes a byte, so the read end turns readable and
   stays so until reset drains it. poll() on it beside a socket is the
   whole mechanism; no shared flag, so no data race and signal-safe. */
struct asb_cancel {
    int rfd, wfd;
    asb_allocator alloc;
};

static int asb__set_cloexec_nonblock(int fd);

ASB_API asb_result asb_cancel_create(const asb_allocator *alloc, asb_cancel **out,
                                     asb_error *err) {
    asb_allocator a;
    asb_cancel *t;
    int fds[2];
    if (!out) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "cancel: NULL out");
    *out = NULL;
    if (asb__allocator_resolve(alloc, &a) != ASB_OK)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "cancel: incomplete allocator");
    t = (asb_cancel *)a.alloc_fn(sizeof *t, a.user_data);
    if (!t) return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "cancel: out of memory");
    if (asb__pipe_cloexec(fds) != 0) { /* close-on-exec from the start */
        int e = errno;
        a.free_fn(t, a.user_data);
        return asb__fail(err, ASB_ERR_IO, "cancel: pipe: %s", strerror(e));
    }
    if (asb__set_cloexec_nonblock(fds[0]) < 0 || asb__set_cloexec_nonblock(fds[1]) < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        a.free_fn(t, a.user_data);
        return asb__fail(err, ASB_ERR_IO, "cancel: fcntl: %s", strerror(e));
    }
    t->rfd = fds[0];
    t->wfd = fds[1];
    t->alloc = a;
    *out = t;
    return ASB_OK;
}

ASB_API void asb_cancel_trigger(asb_cancel *t) {
    ssize_t n;
    if (!t) return;
    /* a full pipe (EAGAIN) is triggered already */
    do {
        n = write(t->wfd, "x", 1);
    } while (n < 0 && errno == EINTR);
}

ASB_API int asb_cancel_is_triggered(const asb_cancel *t) {
    struct pollfd p;
    if (!t) return 0;
    p.fd = t->rfd;
    p.events = POLLIN;
    p.revents = 0;
    return poll(&p, 1, 0) > 0 && (p.revents & POLLIN);
}

ASB_API void asb_cancel_reset(asb_cancel *t) {
    char buf[256];
    if (!t) return;
    while (read(t->rfd, buf, sizeof buf) > 0 || errno == EINTR) {}
}

ASB_API void asb_cancel_free(asb_cancel *t) {
    if (!t) return;
    close(t->rfd);
    close(t->wfd);
    t->alloc.free_fn(t, t->alloc.user_data);
}

/* Sleeps ms, or less when the token is triggered meanwhile: 1 then. */
static int asb__sleep_or_cancel(int64_t ms, const asb_cancel *t) {
    int64_t end = asb__now_ms() + ms;
    if (!t) {
        asb__sleep_ms(ms);
        return 0;
    }
    for (;;) {
        struct pollfd p;
        int64_t left = end - asb__now_ms();
        int r;
        if (left <= 0) return 0;
        p.fd = t->rfd;
        p.events = POLLIN;
        p.revents = 0;
        r = poll(&p, 1, left > INT_MAX ? INT_MAX : (int)left);
        if (r > 0) return 1;
        if (r < 0 && errno != EINTR) return 0;
    }
}

/* -- connections ----------------------------------------------------------------- */

/* A streamed request body goes out in pieces of this size (heap memory). */
#define ASB__BODY_CHUNK 65536

#define ASB__POOL_KEY_SIZE 300

typedef struct asb__conn {
    int fd;
    int use_tls;
    int reused;             /* came from the pool */
    int64_t idle_since;     /* when it went back to the pool (monotonic ms) */
    char key[ASB__POOL_KEY_SIZE]; /* scheme://host:port (+ proxy) */
    int64_t deadline;       /* absolute ms for the current call, 0: none */
    int read_timeout_ms;
    int timed_out;          /* the last I/O failure was a timeout */
    int cancelled;          /* ... or the call's cancel token */
    const asb_cancel *cancel; /* the current call's token, NULL: none */
    int last_errno;
    uint64_t bytes_sent;    /* on this request: did anything leave? */
    char rbuf[65536];      /* large reads: fewer syscalls on big bodies */
    size_t rpos, rlen;
#if ASB_TLS
    int tls_ready;
    int session_saved;      /* offered to the session cache already */
    mbedtls_ssl_context ssl;
    int verify_ip;          /* check the certificate's IP SANs ourselves */
    unsigned char ip[16];
    int ip_len;
#endif
} asb__conn;

/* Waits for the socket; returns 1 ready, 0 timeout, -1 error, -2 the
   call's cancel token was triggered (its pipe turns readable, polled
   beside the socket, so a cancel ends the wait at once). The wait is
   bounded by both the idle timeout and the call's deadline. */
static int asb__wait(asb__conn *c, short events, int idle_ms) {
    for (;;) {
        struct pollfd pfd[2];
        int64_t wait = idle_ms > 0 ? idle_ms : -1;
        int r;
        if (c->deadline) {
            int64_t left = c->deadline - asb__now_ms();
            if (left <= 0) return 0;
            if (wait < 0 || left < wait) wait = left;
        }
        pfd[0].fd = c->fd;
        pfd[0].events = events;
        pfd[0].revents = 0;
        pfd[1].fd = c->cancel ? c->cancel->rfd : -1;
        pfd[1].events = POLLIN;
        pfd[1].revents = 0;
        r = poll(pfd, c->cancel ? 2 : 1, wait > INT_MAX ? INT_MAX : (int)wait);
        if (r > 0 && pfd[1].revents) return -2;
        if (r > 0) return 1;
        if (r == 0) return 0;
        if (errno != EINTR) return -1;
    }
}

#if !defined(MSG_NOSIGNAL) && !defined(SO_NOSIGPIPE)
#error "agentsandbox.h: neither MSG_NOSIGNAL nor SO_NOSIGPIPE: a closed peer would raise SIGPIPE"
#endif
/* Sends everything or fails; never raises SIGPIPE. */
static int asb__sock_send(asb__conn *c, const void *buf, size_t len) {
    const char *p = (const char *)buf;
    size_t left = len;
    while (left > 0) {
#ifdef MSG_NOSIGNAL
        ssize_t n = send(c->fd, p, left, MSG_NOSIGNAL);
#else
        ssize_t n = send(c->fd, p, left, 0); /* SO_NOSIGPIPE is set */
#endif
        if (n > 0) {
            p += n;
            left -= (size_t)n;
            c->bytes_sent += (uint64_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int w = asb__wait(c, POLLOUT, c->read_timeout_ms);
            if (w > 0) continue;
            c->timed_out = w == 0;
            c->cancelled = w == -2;
            c->last_errno = w == 0 ? ETIMEDOUT : w == -2 ? ECANCELED : errno;
            return -1;
        }
        c->last_errno = n < 0 ? errno : EPIPE;
        return -1;
    }
    return 0;
}

/* Reads some bytes: >0 count, 0 orderly close, -1 failure (see c->). */
static long asb__sock_recv(asb__conn *c, void *buf, size_t cap) {
    for (;;) {
        ssize_t n = recv(c->fd, buf, cap, 0);
        if (n >= 0) return (long)n;
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int w = asb__wait(c, POLLIN, c->read_timeout_ms);
            if (w > 0) continue;
            c->timed_out = w == 0;
            c->cancelled = w == -2;
            c->last_errno = w == 0 ? ETIMEDOUT : w == -2 ? ECANCELED : errno;
            return -1;
        }
        c->last_errno = errno;
        return -1;
    }
}

static int asb__set_cloexec_nonblock(int fd) {
    int fl = fcntl(fd, F_GETFD);
    if (fl < 0 || fcntl(fd, F_SETFD, fl | FD_CLOEXEC) < 0) return -1;
    fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) return -1;
    return 0;
}

/* -- name resolution, bounded ------------------------------------------------
   getaddrinfo has no timeout of its own: with no nameserver answering,
   musl retries for 30 s and glibc for 5-10 s, far past connect_timeout_ms.
   A host name is therefore resolved on a detached helper thread while the
   caller waits on a pipe (with the deadline and the cancel token); a
   lookup that outlives its caller finishes alone and frees its record.
   The record uses libc's heap, not the client's allocator: it may outlive
   the client (getaddrinfo allocates with libc anyway). IP literals are
   resolved inline (AI_NUMERICHOST never asks a resolver). */
typedef struct asb__lookup {
    pthread_mutex_t lock;
    int refs;              /* the caller and the thread */
    int rc;
    int fds[2];            /* the caller's read end sees EOF once the
                              thread, done, closes the write end */
    struct addrinfo *res;
    struct addrinfo hints;
    char host[256], port[8];
} asb__lookup;

/* Each side closes its own end of the pipe, then lets go of the record. */
static void asb__lookup_release(asb__lookup *l, int end) {
    int last;
    close(l->fds[end]);
    pthread_mutex_lock(&l->lock);
    last = --l->refs == 0;
    pthread_mutex_unlock(&l->lock);
    if (!last) return;
    if (l->res) freeaddrinfo(l->res);
    pthread_mutex_destroy(&l->lock);
    free(l);
}

static void *asb__lookup_thread(void *arg) {
    asb__lookup *l = (asb__lookup *)arg;
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(l->host, l->port, &l->hints, &res);
    pthread_mutex_lock(&l->lock);
    l->rc = rc;
    l->res = res;
    pthread_mutex_unlock(&l->lock);
    asb__lookup_release(l, 1); /* EOF for the caller: done */
    return NULL;
}

/* getaddrinfo within the deadline. Returns 0 or an EAI_* code; *timed_out
   1 when the deadline passed first, -2 when the cancel token fired. */
static int asb__resolve(asb__conn *c, const char *host, const char *port,
                        const struct addrinfo *hints, int64_t deadline,
                        struct addrinfo **res, int *timed_out) {
    asb__lookup *l;
    pthread_t th;
    pthread_attr_t at;
    unsigned char ip[16];
    int rc, started;
    *res = NULL;
    *timed_out = 0;
    if (asb__ip_literal(host, strlen(host), ip) > 0 || strlen(host) >= sizeof l->host)
        return getaddrinfo(host, port, hints, res);
    l = (asb__lookup *)calloc(1, sizeof *l);
    if (!l) return EAI_MEMORY;
    if (asb__pipe_cloexec(l->fds) != 0) {
        free(l);
        return getaddrinfo(host, port, hints, res);
    }
    pthread_mutex_init(&l->lock, NULL);
    l->refs = 2;
    l->hints = *hints;
    snprintf(l->host, sizeof l->host, "%s", host);
    snprintf(l->port, sizeof l->port, "%s", port);
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    /* glibc's resolver wants more than musl's 128 KiB default at times */
    pthread_attr_setstacksize(&at, 256 * 1024);
    started = pthread_create(&th, &at, asb__lookup_thread, l) == 0;
    pthread_attr_destroy(&at);
    if (!started) {
        l->refs = 1;
        close(l->fds[1]);
        asb__lookup_release(l, 0);
        return getaddrinfo(host, port, hints, res);
    }
    for (;;) {
        struct pollfd pfd[2];
        int64_t left = deadline - asb__now_ms();
        int w;
        if (left <= 0) {
            *timed_out = 1;
            break;
        }
        pfd[0].fd = l->fds[0];
        pfd[0].events = POLLIN;
        pfd[0].revents = 0;
        pfd[1].fd = c->cancel ? c->cancel->rfd : -1;
        pfd[1].events = POLLIN;
        pfd[1].revents = 0;
        w = poll(pfd, c->cancel ? 2 : 1, left > INT_MAX ? INT_MAX : (int)left);
        if (w > 0 && pfd[1].revents) {
            *timed_out = -2;
            break;
        }
        if (w > 0) break;
        if (w < 0 && errno != EINTR) {
            *timed_out = 1;
            break;
        }
    }
    pthread_mutex_lock(&l->lock);
    rc = l->rc;
    if (!*timed_out) {
        *res = l->res; /* ours now */
        l->res = NULL;
    }
    pthread_mutex_unlock(&l->lock);
    asb__lookup_release(l, 0);
    return *timed_out ? EAI_AGAIN : rc;
}

/* Resolves and connects, trying each address in turn within the timeout.
   The socket is non-blocking and close-on-exec. */
static asb_result asb__tcp_connect(asb__conn *c, const char *host, int port,
                                   int timeout_ms, asb_error *err) {
    struct addrinfo hints, *res = NULL, *ai;
    char portstr[8], hq[96];
    int rc, last = 0, timed_out = 0;
    int64_t deadline = asb__now_ms() + timeout_ms;
    if (c->deadline && c->deadline < deadline) deadline = c->deadline;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    snprintf(portstr, sizeof portstr, "%d", port);
    asb__quote(hq, sizeof hq, host, strlen(host), 80);
    rc = asb__resolve(c, host, portstr, &hints, deadline, &res, &timed_out);
    if (timed_out == -2) {
        c->cancelled = 1;
        return asb__fail(err, ASB_ERR_CANCELLED, "resolving \"%s\": cancelled", hq);
    }
    if (rc != 0) {
        /* no resolver configured (a scratch container): say so */
        int none = access("/etc/resolv.conf", F_OK) != 0;
        const char *hint = none ? " (no /etc/resolv.conf: no DNS resolver is configured; "
                                  "use an IP address or list the name in /etc/hosts)"
                                : "";
        if (timed_out)
            return asb__fail(err, ASB_ERR_TIMEOUT,
                             "cannot resolve \"%s\": no answer within the connect timeout%s",
                             hq, hint);
        return asb__fail(err, ASB_ERR_DNS, "cannot resolve \"%s\": %s%s", hq,
                         gai_strerror(rc), hint);
    }
    for (ai = res; ai; ai = ai->ai_next) {
        int fd = asb__socket_cloexec(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
        int one = 1;
        if (fd < 0) {
            last = errno;
            continue;
        }
        if (asb__set_cloexec_nonblock(fd) < 0) {
            last = errno;
            close(fd);
            continue;
        }
#ifdef SO_NOSIGPIPE
        setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
#endif
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        c->fd = fd;
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
        if (errno == EINPROGRESS || errno == EINTR) {
            int64_t saved = c->deadline;
            socklen_t sl = sizeof(int);
            int w, soerr = 0;
            c->deadline = deadline;
            w = asb__wait(c, POLLOUT, -1);
            c->deadline = saved;
            if (w > 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) == 0 &&
                soerr == 0)
                break;
            if (w == 0) timed_out = 1;
            if (w == -2) {
                close(fd);
                c->fd = -1;
                freeaddrinfo(res);
                c->cancelled = 1;
                return asb__fail(err, ASB_ERR_CANCELLED, "connect to %s port %d: cancelled",
                                 hq, port);
            }
            last = w > 0 ? soerr : (w == 0 ? ETIMEDOUT : errno);
        } else {
            last = errno;
        }
        close(fd);
        c->fd = -1;
        if (asb__now_ms() >= deadline) {
            timed_out = 1;
            break;
        }
    }
    freeaddrinfo(res);
    if (c->fd >= 0) return ASB_OK;
    if (timed_out)
        return asb__fail(err, ASB_ERR_TIMEOUT, "connect to %s port %d: timed out",
                         hq, port);
    return asb__fail(err, ASB_ERR_CONNECT, "connect to %s port %d: %s", hq, port,
                     strerror(last ? last : ECONNREFUSED));
}

/* >>tls =====================================================================
   mbedTLS behind the connection: configuration per client, verification
   with the library's own IP-address SAN check (mbedTLS 2.28 has none; 3.x
   gets the same check so both behave alike), readable failures. */

#if ASB_TLS
#if MBEDTLS_VERSION_NUMBER >= 0x03000000
#define ASB__MBEDTLS3 1
#else
#define ASB__MBEDTLS3 0
#endif

/* A session to resume, per endpoint (the pool key). */
#define ASB__TLS_SESSIONS 8
typedef struct asb__tls_session {
    char key[ASB__POOL_KEY_SIZE]; /* "" for a free slot */
    mbedtls_ssl_session s;
    int64_t stamp;
} asb__tls_session;

typedef struct asb__tls {
    mbedtls_ssl_config conf;
    mbedtls_x509_crt ca;
    mbedtls_x509_crt cert;
    mbedtls_pk_context key;
    mbedtls_ctr_drbg_context drbg; /* seeded from asb__random_bytes */
    pthread_mutex_t rng_lock; /* the DRBG is shared by every connection */
    int has_ca, has_cert, insecure;
    int ca_from_env;        /* SSL_CERT_FILE / SSL_CERT_DIR were set */
    char *server_name;
    /* Sessions from verified connections, resumed by the next connection
       to the same endpoint: an abbreviated handshake skips the key
       exchange and the signature checks, which cost ~6 ms of CPU with
       mbedTLS 2.28's bignum code (measured against the apiserver: 12 ms
       per new connection). Every watch opens one. */
    pthread_mutex_t sess_lock;
    asb__tls_session sess[ASB__TLS_SESSIONS];
} asb__tls;

static const char *asb__alpn[] = {"http/1.1", NULL};

#if ASB__MBEDTLS3
/* Signature algorithms, PKCS#1 v1.5 before PSS for RSA. mbedTLS 3.6.6 with
   TLS 1.3 enabled offers rsa_pss_rsae_* but then rejects a TLS 1.2
   ServerKeyExchange signed that way (-0x6600); servers that follow the
   client's order (Go's crypto/tls: the Kubernetes apiserver) then pick
   PKCS#1 and the handshake works. TLS 1.3 still gets PSS, which it needs. */
static const uint16_t asb__sig_algs[] = {
    MBEDTLS_TLS1_3_SIG_ECDSA_SECP256R1_SHA256, MBEDTLS_TLS1_3_SIG_ECDSA_SECP384R1_SHA384,
    MBEDTLS_TLS1_3_SIG_ECDSA_SECP521R1_SHA512, MBEDTLS_TLS1_3_SIG_RSA_PKCS1_SHA256,
    MBEDTLS_TLS1_3_SIG_RSA_PKCS1_SHA384,       MBEDTLS_TLS1_3_SIG_RSA_PKCS1_SHA512,
    MBEDTLS_TLS1_3_SIG_RSA_PSS_RSAE_SHA256,    MBEDTLS_TLS1_3_SIG_RSA_PSS_RSAE_SHA384,
    MBEDTLS_TLS1_3_SIG_RSA_PSS_RSAE_SHA512,    MBEDTLS_TLS1_3_SIG_NONE};
#endif

/* The DRBG's seed: the kernel, never mbedTLS's entropy module (which
   opens /dev/urandom on musl: absent in a minimal container). */
static int asb__tls_entropy(void *ctx, unsigned char *out, size_t len) {
    (void)ctx;
    return asb__random_bytes(out, len) == ASB_OK ? 0
                                                 : MBEDTLS_ERR_CTR_DRBG_ENTROPY_SOURCE_FAILED;
}

#if defined(MBEDTLS_PSA_CRYPTO_EXTERNAL_RNG) && ASB_PSA_EXTERNAL_RNG
/* An mbedTLS built with MBEDTLS_PSA_CRYPTO_EXTERNAL_RNG (make static builds
   it so) asks the application for PSA's randomness: here it is the same
   kernel source, so nothing in mbedTLS needs /dev. Not asb_-prefixed: the
   name is mbedTLS's; define ASB_PSA_EXTERNAL_RNG 0 to supply your own. */
psa_status_t mbedtls_psa_external_get_random(mbedtls_psa_external_random_context_t *context,
                                             uint8_t *output, size_t output_size,
                                             size_t *output_length) {
    (void)context;
    if (asb__random_bytes(output, output_size) != ASB_OK)
        return PSA_ERROR_INSUFFICIENT_ENTROPY;
    *output_length = output_size;
    return PSA_SUCCESS;
}
#endif

static int asb__tls_rng(void *ctx, unsigned char *out, size_t len) {
    asb__tls *t = (asb__tls *)ctx;
    int r;
    pthread_mutex_lock(&t->rng_lock);
    r = mbedtls_ctr_drbg_random(&t->drbg, out, len);
    pthread_mutex_unlock(&t->rng_lock);
    return r;
}

static void asb__tls_strerror(int code, char *buf, size_t cap) {
#if defined(MBEDTLS_ERROR_C)
    mbedtls_strerror(code, buf, cap);
#else
    snprintf(buf, cap, "mbedTLS error");
#endif
}

/* memmem is not POSIX; this one is only used on short needles. */
static const void *asb__memmem(const void *hay, size_t hl, const void *needle,
                               size_t nl) {
    const char *h = (const char *)hay;
    size_t i;
    if (nl == 0) return hay;
    for (i = 0; i + nl <= hl; i++)
        if (h[i] == *(const char *)needle && memcmp(h + i, needle, nl) == 0)
            return h + i;
    return NULL;
}

/* Parses certificates from memory: PEM needs its terminating NUL counted,
   DER must not have one, so PEM is copied with a NUL appended. */
static int asb__x509_parse_mem(mbedtls_x509_crt *crt, const void *data, size_t len,
                               const asb_allocator *a) {
    int r;
    char *tmp;
    if (len >= 10 && asb__memmem(data, len, "-----BEGIN", 10)) {
        tmp = (char *)a->alloc_fn(len + 1, a->user_data);
        if (!tmp) return MBEDTLS_ERR_X509_ALLOC_FAILED;
        memcpy(tmp, data, len);
        tmp[len] = '\0';
        r = mbedtls_x509_crt_parse(crt, (const unsigned char *)tmp, len + 1);
        a->free_fn(tmp, a->user_data);
        return r;
    }
    return mbedtls_x509_crt_parse_der(crt, (const unsigned char *)data, len);
}

static int asb__pk_parse_mem(asb__tls *t, const void *data, size_t len,
                             const asb_allocator *a) {
    int r;
    char *tmp = (char *)a->alloc_fn(len + 1, a->user_data);
    if (!tmp) return MBEDTLS_ERR_PK_ALLOC_FAILED;
    memcpy(tmp, data, len);
    tmp[len] = '\0';
#if ASB__MBEDTLS3
    r = mbedtls_pk_parse_key(&t->key, (const unsigned char *)tmp, len + 1, NULL, 0,
                             asb__tls_rng, t);
#else
    r = mbedtls_pk_parse_key(&t->key, (const unsigned char *)tmp, len + 1, NULL, 0);
#endif
    asb__free_secret(a, tmp, len + 1); /* the key's PEM was in tmp */
    (void)t;
    return r;
}

static const char *asb__system_ca_files[] = {
    "/etc/ssl/certs/ca-certificates.crt", /* Debian, Ubuntu, Alpine, Arch */
    "/etc/pki/tls/certs/ca-bundle.crt",   /* Fedora, RHEL */
    "/etc/ssl/ca-bundle.pem",             /* openSUSE */
    "/etc/ssl/cert.pem",                  /* macOS, BSDs, Alpine */
    NULL};

static int asb__tls_config_empty(const asb_tls_config *c) {
    return !c->ca_file && !c->ca_dir && !c->ca_data && !c->client_cert_file &&
           !c->client_cert_data && !c->client_key_file && !c->client_key_data &&
           !c->server_name && !c->insecure_skip_verify;
}

static void asb__tls_free(asb__tls *t, const asb_allocator *a) {
    int i;
    if (!t) return;
    for (i = 0; i < ASB__TLS_SESSIONS; i++) mbedtls_ssl_session_free(&t->sess[i].s);
    pthread_mutex_destroy(&t->sess_lock);
    mbedtls_ssl_config_free(&t->conf);
    mbedtls_x509_crt_free(&t->ca);
    mbedtls_x509_crt_free(&t->cert);
    mbedtls_pk_free(&t->key);
    mbedtls_ctr_drbg_free(&t->drbg);
    pthread_mutex_destroy(&t->rng_lock);
    if (t->server_name) a->free_fn(t->server_name, a->user_data);
    a->free_fn(t, a->user_data);
}

static asb_result asb__tls_fail(asb_error *err, int code, const char *what) {
    char m[160];
    asb__tls_strerror(code, m, sizeof m);
    return asb__fail(err, ASB_ERR_TLS_CONFIG, "tls: %s: %s (mbedTLS -0x%04x)", what,
                     m, (unsigned)-code);
}

static asb_result asb__tls_create(const asb_tls_config *cfg, const asb_allocator *a,
                                  asb__tls **out, asb_error *err) {
    asb__tls *t;
    int r;
    const char *ca_src = "the CA data"; /* named in the error: which input is bad */
    static const char pers[] = "agentsandbox.h";
    *out = NULL;
    t = (asb__tls *)a->alloc_fn(sizeof *t, a->user_data);
    if (!t) return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "tls: out of memory");
    memset(t, 0, sizeof *t);
    pthread_mutex_init(&t->rng_lock, NULL);
    pthread_mutex_init(&t->sess_lock, NULL);
    {
        int i;
        for (i = 0; i < ASB__TLS_SESSIONS; i++) mbedtls_ssl_session_init(&t->sess[i].s);
    }
    mbedtls_ssl_config_init(&t->conf);
    mbedtls_x509_crt_init(&t->ca);
    mbedtls_x509_crt_init(&t->cert);
    mbedtls_pk_init(&t->key);
    mbedtls_ctr_drbg_init(&t->drbg);
    {
        /* The library's own source first, so its absence is named. */
        unsigned char probe[16];
        char why[200];
        if (asb__random_bytes_why(probe, sizeof probe, why, sizeof why) != ASB_OK) {
            asb__tls_free(t, a);
            return asb__fail(err, ASB_ERR_TLS_CONFIG, "tls: %s", why);
        }
    }
#if ASB__MBEDTLS3 && defined(MBEDTLS_PSA_CRYPTO_C)
    {
        psa_status_t ps = psa_crypto_init();
        if (ps != PSA_SUCCESS) {
            asb__tls_free(t, a);
#if defined(MBEDTLS_PSA_CRYPTO_EXTERNAL_RNG)
            return asb__fail(err, ASB_ERR_TLS_CONFIG, "tls: psa_crypto_init failed (PSA %d)",
                             (int)ps);
#else
            /* mbedTLS gathers PSA's entropy itself: getrandom only with
               glibc, /dev/urandom elsewhere (musl), which an empty root
               lacks. */
            return asb__fail(err, ASB_ERR_TLS_CONFIG,
                             "tls: psa_crypto_init failed (PSA %d): this mbedTLS reads its "
                             "own entropy (/dev/urandom on musl and without glibc); "
                             "provide /dev/urandom, or build mbedTLS with "
                             "MBEDTLS_PSA_CRYPTO_EXTERNAL_RNG so it uses this library's "
                             "getrandom source",
                             (int)ps);
#endif
        }
    }
#endif
    r = mbedtls_ctr_drbg_seed(&t->drbg, asb__tls_entropy, NULL,
                              (const unsigned char *)pers, sizeof pers - 1);
    if (r != 0) {
        asb_result e = asb__tls_fail(err, r, "seeding the random generator");
        asb__tls_free(t, a);
        return e;
    }
    t->insecure = cfg->insecure_skip_verify != 0;
    if (cfg->ca_data && cfg->ca_data_len) {
        r = asb__x509_parse_mem(&t->ca, cfg->ca_data, cfg->ca_data_len, a);
        if (r != 0) goto bad_ca;
        t->has_ca = 1;
    }
    if (cfg->ca_file) {
        ca_src = cfg->ca_file;
        r = mbedtls_x509_crt_parse_file(&t->ca, cfg->ca_file);
        if (r != 0) goto bad_ca;
        t->has_ca = 1;
    }
    if (cfg->ca_dir) {
        ca_src = cfg->ca_dir;
        r = mbedtls_x509_crt_parse_path(&t->ca, cfg->ca_dir);
        if (r < 0) goto bad_ca;
        if (r > 0 && t->ca.version == 0) {
            r = MBEDTLS_ERR_X509_INVALID_FORMAT;
            goto bad_ca;
        }
        t->has_ca = 1;
    }
    if (!t->has_ca && !t->insecure) {
        /* SSL_CERT_FILE / SSL_CERT_DIR, the convention of OpenSSL, curl, Go
           and Python, replace the system locations when set: a minimal
           container ships its bundle where it likes. The directory may be
           a colon-separated list, as for OpenSSL. */
        const char *ef = getenv("SSL_CERT_FILE"), *ed = getenv("SSL_CERT_DIR");
        int k;
        if ((ef && *ef) || (ed && *ed)) {
            t->ca_from_env = 1;
            if (ef && *ef && mbedtls_x509_crt_parse_file(&t->ca, ef) >= 0 &&
                t->ca.version != 0)
                t->has_ca = 1;
            while (ed && *ed) {
                char dir[512];
                size_t n = strcspn(ed, ":");
                if (n > 0 && n < sizeof dir) {
                    memcpy(dir, ed, n);
                    dir[n] = '\0';
                    if (mbedtls_x509_crt_parse_path(&t->ca, dir) >= 0 && t->ca.version != 0)
                        t->has_ca = 1;
                }
                ed += n + (ed[n] == ':');
            }
        } else {
            for (k = 0; asb__system_ca_files[k]; k++) {
                if (access(asb__system_ca_files[k], R_OK) == 0 &&
                    mbedtls_x509_crt_parse_file(&t->ca, asb__system_ca_files[k]) >= 0 &&
                    t->ca.version != 0) {
                    t->has_ca = 1;
                    break;
                }
            }
        }
        /* no bundle is not an error yet: only an https request needs one */
    }
    if ((cfg->client_cert_file || cfg->client_cert_data) !=
        (cfg->client_key_file || cfg->client_key_data)) {
        asb__tls_free(t, a);
        return asb__fail(err, ASB_ERR_TLS_CONFIG,
                         "tls: a client certificate needs its key, and a key its "
                         "certificate");
    }
    if (cfg->client_cert_file || cfg->client_cert_data) {
        r = cfg->client_cert_data
                ? asb__x509_parse_mem(&t->cert, cfg->client_cert_data,
                                      cfg->client_cert_data_len, a)
                : mbedtls_x509_crt_parse_file(&t->cert, cfg->client_cert_file);
        if (r != 0) {
            char what[300];
            asb_result e;
            snprintf(what, sizeof what, "cannot read the client certificate%s%.256s",
                     cfg->client_cert_data ? "" : " ",
                     cfg->client_cert_data ? "" : cfg->client_cert_file);
            e = asb__tls_fail(err, r, what);
            asb__tls_free(t, a);
            return e;
        }
        if (cfg->client_key_data)
            r = asb__pk_parse_mem(t, cfg->client_key_data, cfg->client_key_data_len, a);
        else
#if ASB__MBEDTLS3
            r = mbedtls_pk_parse_keyfile(&t->key, cfg->client_key_file, NULL,
                                         asb__tls_rng, t);
#else
            r = mbedtls_pk_parse_keyfile(&t->key, cfg->client_key_file, NULL);
#endif
        if (r != 0) {
            char what[300];
            asb_result e;
            snprintf(what, sizeof what, "cannot read the client key%s%.256s",
                     cfg->client_key_data ? "" : " ",
                     cfg->client_key_data ? "" : cfg->client_key_file);
            e = asb__tls_fail(err, r, what);
            asb__tls_free(t, a);
            return e;
        }
        t->has_cert = 1;
    }
    if (cfg->server_name) {
        size_t n = strlen(cfg->server_name);
        t->server_name = (char *)a->alloc_fn(n + 1, a->user_data);
        if (!t->server_name) {
            asb__tls_free(t, a);
            return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "tls: out of memory");
        }
        memcpy(t->server_name, cfg->server_name, n + 1);
    }
    r = mbedtls_ssl_config_defaults(&t->conf, MBEDTLS_SSL_IS_CLIENT,
                                    MBEDTLS_SSL_TRANSPORT_STREAM,
                                    MBEDTLS_SSL_PRESET_DEFAULT);
    if (r != 0) {
        asb_result e = asb__tls_fail(err, r, "mbedtls_ssl_config_defaults");
        asb__tls_free(t, a);
        return e;
    }
    /* OPTIONAL, not REQUIRED: the handshake completes so the library can
       apply its own IP check and say exactly why a certificate failed;
       any failure flag still refuses the connection (asb__tls_handshake). */
    mbedtls_ssl_conf_authmode(&t->conf, t->insecure ? MBEDTLS_SSL_VERIFY_NONE
                                                    : MBEDTLS_SSL_VERIFY_OPTIONAL);
    /* TLS 1.2 at least: mbedTLS 2.28 still speaks 1.0 and 1.1 by default
       (3.x dropped them), and a peer or a man in the middle offering only
       those must get no handshake */
#if ASB__MBEDTLS3
#if MBEDTLS_VERSION_NUMBER >= 0x03020000
    mbedtls_ssl_conf_min_tls_version(&t->conf, MBEDTLS_SSL_VERSION_TLS1_2);
#endif
#else
    mbedtls_ssl_conf_min_version(&t->conf, MBEDTLS_SSL_MAJOR_VERSION_3,
                                 MBEDTLS_SSL_MINOR_VERSION_3);
#endif
    mbedtls_ssl_conf_ca_chain(&t->conf, &t->ca, NULL);
    mbedtls_ssl_conf_rng(&t->conf, asb__tls_rng, t);
    mbedtls_ssl_conf_alpn_protocols(&t->conf, asb__alpn);
#if ASB__MBEDTLS3 && defined(MBEDTLS_SSL_PROTO_TLS1_3) && defined(MBEDTLS_SSL_SESSION_TICKETS)
    /* TLS 1.3 tickets arrive after the handshake; mbedTLS 3.6 drops them
       unless asked to hand them over (asb__conn_read takes the signal) */
    mbedtls_ssl_conf_tls13_enable_signal_new_session_tickets(
        &t->conf, MBEDTLS_SSL_TLS1_3_SIGNAL_NEW_SESSION_TICKETS_ENABLED);
#endif
#if ASB__MBEDTLS3
    mbedtls_ssl_conf_sig_algs(&t->conf, asb__sig_algs);
#endif
    if (t->has_cert) {
        r = mbedtls_ssl_conf_own_cert(&t->conf, &t->cert, &t->key);
        if (r != 0) {
            asb_result e = asb__tls_fail(err, r, "client certificate and key");
            asb__tls_free(t, a);
            return e;
        }
    }
    *out = t;
    return ASB_OK;
bad_ca : {
    char what[300];
    asb_result e;
    snprintf(what, sizeof what, "cannot read the CA certificates from %.256s", ca_src);
    e = asb__tls_fail(err, r, what);
    asb__tls_free(t, a);
    return e;
}
}

/* The BIO callbacks: blocking-with-timeout I/O on the non-blocking socket,
   so mbedTLS never sees WANT_READ/WANT_WRITE. */
static int asb__bio_send(void *ctx, const unsigned char *buf, size_t len) {
    asb__conn *c = (asb__conn *)ctx;
    if (asb__sock_send(c, buf, len) != 0)
        return c->timed_out || c->cancelled ? MBEDTLS_ERR_SSL_TIMEOUT
                                            : MBEDTLS_ERR_NET_SEND_FAILED;
    return len > INT_MAX ? INT_MAX : (int)len;
}

static int asb__bio_recv(void *ctx, unsigned char *buf, size_t len) {
    asb__conn *c = (asb__conn *)ctx;
    long n = asb__sock_recv(c, buf, len > INT_MAX ? INT_MAX : len);
    if (n < 0)
        return c->timed_out || c->cancelled
                   ? MBEDTLS_ERR_SSL_TIMEOUT
                   : (c->last_errno == ECONNRESET ? MBEDTLS_ERR_NET_CONN_RESET
                                                           : MBEDTLS_ERR_NET_RECV_FAILED);
    return (int)n;
}

/* Does the certificate carry this address among its IP-address SANs? */
static int asb__crt_has_ip(const mbedtls_x509_crt *crt, const unsigned char *ip,
                           int ip_len) {
    const mbedtls_x509_sequence *s = &crt->subject_alt_names;
    for (; s && s->buf.p; s = s->next) {
        if (s->buf.tag == (MBEDTLS_ASN1_CONTEXT_SPECIFIC | 7) &&
            s->buf.len == (size_t)ip_len && memcmp(s->buf.p, ip, (size_t)ip_len) == 0)
            return 1;
    }
    return 0;
}

static int asb__tls_verify_cb(void *ctx, mbedtls_x509_crt *crt, int depth,
                              uint32_t *flags) {
    asb__conn *c = (asb__conn *)ctx;
    if (depth == 0 && c->verify_ip) {
        /* the name check for an IP host is the IP-SAN check, ours */
        *flags &= ~(uint32_t)MBEDTLS_X509_BADCERT_CN_MISMATCH;
        if (!asb__crt_has_ip(crt, c->ip, c->ip_len))
            *flags |= MBEDTLS_X509_BADCERT_CN_MISMATCH;
    }
    return 0;
}

/* Offers the endpoint's saved session, if any, for resumption (the
   server may still insist on a full handshake). set_session copies it. */
static int asb__tls_session_load(asb__tls *t, mbedtls_ssl_context *ssl, const char *key) {
    int i, offered = 0;
    pthread_mutex_lock(&t->sess_lock);
    for (i = 0; i < ASB__TLS_SESSIONS; i++)
        if (t->sess[i].key[0] && strcmp(t->sess[i].key, key) == 0) {
            offered = mbedtls_ssl_set_session(ssl, &t->sess[i].s) == 0;
            break;
        }
    pthread_mutex_unlock(&t->sess_lock);
    return offered;
}

/* Forgets the endpoint's session: a handshake that offered it failed, and
   a server that chokes on resumption must get full handshakes from now. */
static void asb__tls_session_drop(asb__tls *t, const char *key) {
    int i;
    pthread_mutex_lock(&t->sess_lock);
    for (i = 0; i < ASB__TLS_SESSIONS; i++)
        if (t->sess[i].key[0] && strcmp(t->sess[i].key, key) == 0) {
            mbedtls_ssl_session_free(&t->sess[i].s);
            mbedtls_ssl_session_init(&t->sess[i].s);
            t->sess[i].key[0] = '\0';
            t->sess[i].stamp = 0;
        }
    pthread_mutex_unlock(&t->sess_lock);
}

/* Keeps the session of a connection that completed a request, once per
   connection: by then a TLS 1.3 server's ticket has arrived too. Only
   verified connections get here (a failed verify never completes). */
static void asb__tls_session_save(asb__tls *t, asb__conn *c) {
    mbedtls_ssl_session tmp;
    int i, slot = 0;
    if (!c->tls_ready || c->session_saved) return;
    c->session_saved = 1;
    mbedtls_ssl_session_init(&tmp);
    if (mbedtls_ssl_get_session(&c->ssl, &tmp) != 0) {
        mbedtls_ssl_session_free(&tmp);
        return;
    }
    pthread_mutex_lock(&t->sess_lock);
    for (i = 0; i < ASB__TLS_SESSIONS; i++) {
        if (strcmp(t->sess[i].key, c->key) == 0) { /* the endpoint's own */
            slot = i;
            break;
        }
        if (t->sess[i].stamp < t->sess[slot].stamp) slot = i; /* else the oldest */
    }
    mbedtls_ssl_session_free(&t->sess[slot].s);
    t->sess[slot].s = tmp; /* moved: tmp's pointers now belong to the slot */
    snprintf(t->sess[slot].key, sizeof t->sess[slot].key, "%s", c->key);
    t->sess[slot].stamp = asb__now_ms();
    pthread_mutex_unlock(&t->sess_lock);
}

static asb_result asb__tls_handshake(asb__conn *c, asb__tls *t, const char *host,
                                     int port, int host_is_ip, asb_error *err) {
    int r, offered;
    uint32_t flags;
    const char *name = t->server_name ? t->server_name : host;
    char hq[112], nq[96];
    /* errors name the endpoint as host:port: two servers on one host are
       told apart (an IPv6 address in brackets) */
    asb__quote(nq, sizeof nq, name, strlen(name), 80);
    snprintf(hq, sizeof hq, strchr(nq, ':') ? "[%s]:%d" : "%s:%d", nq, port);
    if (!t->has_ca && !t->insecure)
        return asb__fail(err, ASB_ERR_TLS_CONFIG,
                         "tls: no CA certificates to verify %s (%s; set ca_file, ca_dir "
                         "or ca_data, or SSL_CERT_FILE or SSL_CERT_DIR)",
                         hq,
                         t->ca_from_env ? "SSL_CERT_FILE / SSL_CERT_DIR name no readable "
                                          "certificate"
                                        : "no system bundle: /etc/ssl/certs/ca-certificates.crt "
                                          "and the other usual places are missing");
    mbedtls_ssl_init(&c->ssl);
    c->tls_ready = 1;
    r = mbedtls_ssl_setup(&c->ssl, &t->conf);
    if (r != 0) return asb__tls_fail(err, r, "mbedtls_ssl_setup");
    c->verify_ip = 0;
    if (!t->server_name && host_is_ip) {
        unsigned char ip[16];
        int v = asb__ip_literal(host, strlen(host), ip);
        c->verify_ip = 1;
        c->ip_len = v == 4 ? 4 : 16;
        memcpy(c->ip, ip, (size_t)c->ip_len);
        /* No SNI for an address (RFC 6066): mbedTLS 3.x would send the IP
           as SNI if given it as the hostname, and since 3.6.3 refuses to
           verify without one unless told explicitly (NULL). The name
           check for an address is our callback's IP-SAN check. */
#if ASB__MBEDTLS3
        r = mbedtls_ssl_set_hostname(&c->ssl, NULL);
#else
        r = 0;
#endif
    } else {
        r = mbedtls_ssl_set_hostname(&c->ssl, name);
    }
    if (r != 0) return asb__tls_fail(err, r, "server name");
    mbedtls_ssl_set_verify(&c->ssl, asb__tls_verify_cb, c);
    mbedtls_ssl_set_bio(&c->ssl, c, asb__bio_send, asb__bio_recv, NULL);
    offered = asb__tls_session_load(t, &c->ssl, c->key);
    do {
        r = mbedtls_ssl_handshake(&c->ssl);
    } while (r == MBEDTLS_ERR_SSL_WANT_READ || r == MBEDTLS_ERR_SSL_WANT_WRITE);
    flags = mbedtls_ssl_get_verify_result(&c->ssl);
    if (r == 0 && !t->insecure && flags != 0) r = MBEDTLS_ERR_X509_CERT_VERIFY_FAILED;
    if (r != 0 && offered) asb__tls_session_drop(t, c->key);
    if (r != 0) {
        char m[200], why[300];
        if (r == MBEDTLS_ERR_SSL_TIMEOUT && c->cancelled)
            return asb__fail(err, ASB_ERR_CANCELLED, "tls handshake with %s: cancelled", hq);
        if (r == MBEDTLS_ERR_SSL_TIMEOUT)
            return asb__fail(err, ASB_ERR_TIMEOUT, "tls handshake with %s: timed out",
                             hq);
        if (r == MBEDTLS_ERR_X509_CERT_VERIFY_FAILED && flags != 0 && flags != (uint32_t)-1) {
            size_t k;
            /* the usual three first, in plain words; then mbedTLS's list */
            const char *kind =
                (flags & MBEDTLS_X509_BADCERT_EXPIRED) ? "expired"
                : (flags & MBEDTLS_X509_BADCERT_FUTURE) ? "not yet valid"
                : (flags & MBEDTLS_X509_BADCERT_NOT_TRUSTED) ? "unknown CA"
                : (flags & MBEDTLS_X509_BADCERT_CN_MISMATCH)
                    ? (c->verify_ip ? "name mismatch (no IP-address SAN for this address)"
                                    : "name mismatch")
                    : "rejected";
            mbedtls_x509_crt_verify_info(why, sizeof why, "", flags);
            for (k = 0; why[k]; k++)
                if (why[k] == '\n') why[k] = why[k + 1] ? ';' : '\0';
            return asb__fail(err, ASB_ERR_TLS_VERIFY,
                             "tls: the certificate of %s is not trusted: %s: %s "
                             "(flags 0x%x, mbedTLS -0x%04x)",
                             hq, kind, why, (unsigned)flags, (unsigned)-r);
        }
#if ASB__MBEDTLS3
        if (r == MBEDTLS_ERR_SSL_BAD_PROTOCOL_VERSION)
#else
        if (r == MBEDTLS_ERR_SSL_BAD_HS_PROTOCOL_VERSION)
#endif
            return asb__fail(err, ASB_ERR_TLS_HANDSHAKE,
                             "tls handshake with %s failed: it offers a TLS version "
                             "older than TLS 1.2, the oldest this library speaks "
                             "(mbedTLS -0x%04x)",
                             hq, (unsigned)-r);
        asb__tls_strerror(r, m, sizeof m);
        return asb__fail(err, ASB_ERR_TLS_HANDSHAKE,
                         "tls handshake with %s failed: %s (mbedTLS -0x%04x)", hq, m,
                         (unsigned)-r);
    }
    return ASB_OK;
}
#endif /* ASB_TLS */

ASB_API const char *asb_tls_backend(void) {
#if ASB_TLS
    return MBEDTLS_VERSION_STRING_FULL;
#else
    return "none";
#endif
}

/* >>http (client) ==========================================================
   The pool, connection set-up and the request loop with retries.

   -- the client -------------------------------------------------------------- */

#define ASB__MAX_POOL 256

struct asb_http_client {
    asb_allocator alloc;
    int connect_timeout_ms, read_timeout_ms, max_headers, max_idle, max_idle_ms;
    size_t max_body, max_head;
    asb_retry_policy retry;
    char *user_agent;
    char *proxy;             /* "host:port" or NULL */
    char *proxy_auth;        /* base64 user:pass or NULL (never logged) */
    char *no_proxy;          /* NO_PROXY list or NULL */
    asb_logger log;
    asb_result (*dial)(void *, const char *, int, int *, asb_error *); /* NULL: TCP */
    void *dial_user;
    pthread_mutex_t lock;    /* guards the pool */
    asb__conn *idle[ASB__MAX_POOL];
    int idle_count;
    int hold_on_429;         /* a 429 holds every request of the client (not
                                only the refused one) until its Retry-After:
                                set for an apiserver's client, whose 429s
                                say the server as a whole is shedding load */
    int64_t hold_until;      /* monotonic ms; under lock */
#if ASB_TLS
    asb__tls *tls;
#endif
};

/* Keeps at least n idle connections from now on (capped at
   ASB__MAX_POOL), for callers about to run n requests at once; a client
   made with no pool (-1) keeps none. */
static void asb__http_pool_grow(asb_http_client *cl, int n) {
    if (!cl) return;
    if (n > ASB__MAX_POOL) n = ASB__MAX_POOL;
    pthread_mutex_lock(&cl->lock);
    if (cl->max_idle > 0 && cl->max_idle < n) cl->max_idle = n;
    pthread_mutex_unlock(&cl->lock);
}

static char *asb__strdup(const asb_allocator *a, const char *s, size_t n) {
    char *p = (char *)a->alloc_fn(n + 1, a->user_data);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

static void asb__conn_close(asb_http_client *cl, asb__conn *c) {
    if (!c) return;
#if ASB_TLS
    if (c->tls_ready) {
        if (c->fd >= 0) {
            /* a best-effort close_notify that must not wait on the peer */
            int64_t saved = c->deadline;
            c->deadline = asb__now_ms() + 100;
            mbedtls_ssl_close_notify(&c->ssl);
            c->deadline = saved;
        }
        mbedtls_ssl_free(&c->ssl);
        c->tls_ready = 0;
    }
#endif
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    cl->alloc.free_fn(c, cl->alloc.user_data);
}

/* Longest proxy user:pass taken; longer is an error, never a CONNECT cut
   short. */
#define ASB__PROXY_AUTH_MAX 4096

/* Sets up the proxy from the description or the environment. Only an
   http:// proxy is spoken to: TLS to the proxy itself is not implemented,
   and an https:// proxy spoken to in clear would expose the CONNECT target
   and the credentials, so it is refused (requests to https:// servers
   still run TLS end to end inside the CONNECT tunnel). */
static asb_result asb__client_proxy(asb_http_client *cl, const asb_http_client_desc *d,
                                    asb_error *err) {
    const char *p = d->proxy_url;
    asb_url u;
    asb_result r;
    const char *at = NULL, *hs, *he, *q;
    char *tmp = NULL;
    if (!p && d->proxy_from_environment) {
        const char *np = getenv("NO_PROXY");
        if (!np) np = getenv("no_proxy");
        if (np && *np) {
            cl->no_proxy = asb__strdup(&cl->alloc, np, strlen(np));
            if (!cl->no_proxy) return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "out of memory");
        }
        p = getenv("HTTPS_PROXY");
        if (!p || !*p) p = getenv("https_proxy");
        if (!p || !*p) p = getenv("HTTP_PROXY");
        if (!p || !*p) p = getenv("http_proxy");
        if (p && !*p) p = NULL;
    }
    if (!p) return ASB_OK;
    /* user:pass@ is allowed here (and only here): the authority's last '@'
       ends it (RFC 3986; an '@' in a path is no credential), then it is
       parsed away */
    hs = strstr(p, "://");
    hs = hs ? hs + 3 : p;
    he = hs + strcspn(hs, "/?#");
    for (q = hs; q < he; q++)
        if (*q == '@') at = q;
    if (at) {
        asb_buf b;
        if ((size_t)(at - hs) > ASB__PROXY_AUTH_MAX)
            return asb__fail(err, ASB_ERR_PROXY,
                             "proxy: credentials longer than %d bytes", ASB__PROXY_AUTH_MAX);
        asb_buf_init(&b, &cl->alloc);
        b.wipe = 1; /* the proxy's credentials */
        if (asb_base64_encode(hs, (size_t)(at - hs), &b) != ASB_OK) {
            asb_buf_free(&b);
            return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "out of memory");
        }
        cl->proxy_auth = b.ptr;
        tmp = (char *)cl->alloc.alloc_fn(strlen(p) + 1, cl->alloc.user_data);
        if (!tmp) return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "out of memory");
        memcpy(tmp, p, (size_t)(hs - p));
        strcpy(tmp + (hs - p), at + 1);
        p = tmp;
    }
    r = asb_url_parse(p, strlen(p), &u, err);
    if (r == ASB_OK && u.is_https) {
        r = asb__fail(err, ASB_ERR_PROXY,
                      "proxy https://%.*s:%d: TLS to a proxy is not supported, and in clear "
                      "the CONNECT target and any credentials would be readable on the way; "
                      "use an http:// proxy URL (https:// servers stay encrypted end to "
                      "end through its tunnel)",
                      (int)u.host.len, u.host.ptr, u.port);
    } else if (r == ASB_OK) {
        size_t n = u.host.len + 8;
        cl->proxy = (char *)cl->alloc.alloc_fn(n + 2, cl->alloc.user_data);
        if (cl->proxy)
            snprintf(cl->proxy, n + 2, "%.*s:%d", (int)u.host.len, u.host.ptr, u.port);
    } else if (err) {
        char m[ASB_ERROR_MESSAGE_SIZE];
        memcpy(m, err->message, sizeof m);
        snprintf(err->message, sizeof err->message, "proxy: %.400s", m);
        err->code = ASB_ERR_PROXY;
        r = ASB_ERR_PROXY;
    } else {
        r = ASB_ERR_PROXY;
    }
    if (tmp) cl->alloc.free_fn(tmp, cl->alloc.user_data);
    if (r != ASB_OK) return r;
    if (!cl->proxy) return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "out of memory");
    return ASB_OK;
}

ASB_API asb_result asb_http_client_create(const asb_http_client_desc *desc,
                                          asb_http_client **out, asb_error *err) {
    asb_http_client_desc zero;
    asb_http_client *cl;
    asb_allocator a;
    asb_result r;
    const char *ua;
    char defua[64];
    if (!out) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "http: NULL out");
    *out = NULL;
    if (!desc) {
        memset(&zero, 0, sizeof zero);
        desc = &zero;
    }
    if (asb__allocator_resolve(desc->allocator, &a) != ASB_OK)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "allocator: give all three functions or none");
    cl = (asb_http_client *)a.alloc_fn(sizeof *cl, a.user_data);
    if (!cl) return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "http: out of memory");
    memset(cl, 0, sizeof *cl);
    cl->alloc = a;
    cl->log = desc->log;
    cl->dial = desc->dial;
    cl->dial_user = desc->dial_user_data;
    pthread_mutex_init(&cl->lock, NULL);
    /* defaults, in one place */
    cl->connect_timeout_ms = desc->connect_timeout_ms > 0 ? desc->connect_timeout_ms : 10000;
    cl->read_timeout_ms = desc->read_timeout_ms > 0 ? desc->read_timeout_ms : 30000;
    cl->max_body = desc->max_body_bytes ? desc->max_body_bytes : (size_t)16 << 20;
    cl->max_head = desc->max_header_bytes ? desc->max_header_bytes : (size_t)64 << 10;
    cl->max_headers = desc->max_headers > 0 ? desc->max_headers : 128;
    cl->max_idle = desc->max_idle_connections < 0 ? 0
                   : desc->max_idle_connections > 0
                       ? (desc->max_idle_connections > ASB__MAX_POOL ? ASB__MAX_POOL
                                                                     : desc->max_idle_connections)
                       : 8;
    cl->max_idle_ms = desc->max_idle_ms > 0 ? desc->max_idle_ms : 30000;
    cl->retry = desc->retry;
    snprintf(defua, sizeof defua, "agentsandbox.h/%s", ASB_VERSION_STRING);
    ua = desc->user_agent ? desc->user_agent : defua;
    cl->user_agent = asb__strdup(&a, ua, strlen(ua));
    if (!cl->user_agent) {
        asb_http_client_free(cl);
        return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "http: out of memory");
    }
    {
        const char *c;
        for (c = cl->user_agent; *c; c++)
            if ((unsigned char)*c < 0x20 || *c == 0x7f) {
                asb_http_client_free(cl);
                return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                                 "http: user_agent contains a control character");
            }
    }
    r = asb__client_proxy(cl, desc, err);
    if (r != ASB_OK) {
        asb_http_client_free(cl);
        return r;
    }
#if ASB_TLS
    /* Given TLS settings are checked now (a bad CA file fails here); with
       none, TLS (PSA, the DRBG, the system bundle) waits for the first
       https:// connection, so an http://-only client never sets it up. */
    if (!asb__tls_config_empty(&desc->tls)) {
        r = asb__tls_create(&desc->tls, &a, &cl->tls, err);
        if (r != ASB_OK) {
            asb_http_client_free(cl);
            return r;
        }
    }
#endif
    *out = cl;
    return ASB_OK;
}

ASB_API void asb_http_client_free(asb_http_client *cl) {
    int i;
    if (!cl) return;
    for (i = 0; i < cl->idle_count; i++) asb__conn_close(cl, cl->idle[i]);
#if ASB_TLS
    asb__tls_free(cl->tls, &cl->alloc);
#endif
    if (cl->user_agent) cl->alloc.free_fn(cl->user_agent, cl->alloc.user_data);
    if (cl->proxy) cl->alloc.free_fn(cl->proxy, cl->alloc.user_data);
    if (cl->proxy_auth) asb__free_secret(&cl->alloc, cl->proxy_auth, strlen(cl->proxy_auth));
    if (cl->no_proxy) cl->alloc.free_fn(cl->no_proxy, cl->alloc.user_data);
    pthread_mutex_destroy(&cl->lock);
    cl->alloc.free_fn(cl, cl->alloc.user_data);
}

/* NO_PROXY: comma-separated hosts or domain suffixes ("*" for all). */
static int asb__no_proxy_match(const char *list, const asb_url *u) {
    const char *p = list;
    while (p && *p) {
        const char *e = strchr(p, ',');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        while (n && (*p == ' ' || *p == '.')) {
            p++;
            n--;
        }
        while (n && p[n - 1] == ' ') n--;
        if (n == 1 && *p == '*') return 1;
        if (n && n <= u->host.len) {
            /* a host, or a domain suffix at a label boundary */
            size_t k;
            int same = 1;
            for (k = 0; k < n; k++)
                if (asb__ascii_lower((unsigned char)u->host.ptr[u->host.len - n + k]) !=
                    asb__ascii_lower((unsigned char)p[k]))
                    same = 0;
            if (same && (n == u->host.len || u->host.ptr[u->host.len - n - 1] == '.'))
                return 1;
        }
        p = e ? e + 1 : NULL;
    }
    return 0;
}

/* Takes an idle connection for this key, dropping dead ones: a pooled
   connection that is readable (the server closed it, or sent something
   unasked) cannot carry our request, and one idle past max_idle_ms may
   have been closed where we cannot see it (a tunnel that does not pass the
   server's close on: kwok's port-forward keeps its side open, and a request
   sent there is swallowed, not refused). Those are closed here, with every
   other expired one found on the way. */
static asb__conn *asb__pool_take(asb_http_client *cl, const char *key) {
    asb__conn *found = NULL, *expired[ASB__MAX_POOL];
    int i, kept = 0, n_expired = 0;
    int64_t now = asb__now_ms();
    pthread_mutex_lock(&cl->lock);
    /* the newest match (the pool is oldest first); the order of the rest
       is kept, as asb__pool_put evicts from the front */
    for (i = cl->idle_count - 1; i >= 0 && !found; i--)
        if (now - cl->idle[i]->idle_since <= cl->max_idle_ms && strcmp(cl->idle[i]->key, key) == 0)
            found = cl->idle[i];
    for (i = 0; i < cl->idle_count; i++) {
        asb__conn *c = cl->idle[i];
        if (c == found) continue;
        if (now - c->idle_since > cl->max_idle_ms)
            expired[n_expired++] = c;
        else
            cl->idle[kept++] = c;
    }
    cl->idle_count = kept;
    pthread_mutex_unlock(&cl->lock);
    for (i = 0; i < n_expired; i++) asb__conn_close(cl, expired[i]);
    if (found) {
        struct pollfd pfd;
        pfd.fd = found->fd;
        pfd.events = POLLIN;
        pfd.revents = 0;
        if (poll(&pfd, 1, 0) != 0) {
            asb__conn_close(cl, found);
            return NULL;
        }
        found->reused = 1;
    }
    return found;
}

static void asb__pool_put(asb_http_client *cl, asb__conn *c) {
    asb__conn *evict = NULL;
    c->cancel = NULL; /* the call's token may not outlive the call */
    c->idle_since = asb__now_ms();
    pthread_mutex_lock(&cl->lock);
    if (cl->max_idle == 0) {
        evict = c;
    } else {
        if (cl->idle_count >= cl->max_idle) { /* drop the oldest */
            evict = cl->idle[0];
            memmove(cl->idle, cl->idle + 1, (size_t)(cl->idle_count - 1) * sizeof cl->idle[0]);
            cl->idle_count--;
        }
        cl->idle[cl->idle_count++] = c;
    }
    pthread_mutex_unlock(&cl->lock);
    asb__conn_close(cl, evict);
}

/* What a failed read or write was: the token, the deadline, or `other`. */
static asb_result asb__io_failure(const asb__conn *c, asb_result other) {
    return c->cancelled ? ASB_ERR_CANCELLED : c->timed_out ? ASB_ERR_TIMEOUT : other;
}

/* Reads and writes through TLS when the connection has it. */
static asb_result asb__conn_write(asb__conn *c, const void *buf, size_t len) {
#if ASB_TLS
    if (c->use_tls) {
        const unsigned char *p = (const unsigned char *)buf;
        while (len > 0) {
            int n = mbedtls_ssl_write(&c->ssl, p, len);
            if (n == MBEDTLS_ERR_SSL_WANT_READ || n == MBEDTLS_ERR_SSL_WANT_WRITE) continue;
#ifdef MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET
            if (n == MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET) {
                /* TLS 1.3 (mbedTLS 3.x): a write that finished a pending
                   handshake step may report a ticket; the same write again,
                   as asb__conn_read and the http2 layer do */
                c->session_saved = 0;
                continue;
            }
#endif
            if (n <= 0) return asb__io_failure(c, ASB_ERR_SEND);
            p += n;
            len -= (size_t)n;
        }
        return ASB_OK;
    }
#endif
    if (asb__sock_send(c, buf, len) != 0) return asb__io_failure(c, ASB_ERR_SEND);
    return ASB_OK;
}

/* >0 bytes, 0 at the end of the stream, <0 an asb_result. */
static long asb__conn_read(asb__conn *c, char *buf, size_t cap) {
#if ASB_TLS
    if (c->use_tls) {
        for (;;) {
            int n = mbedtls_ssl_read(&c->ssl, (unsigned char *)buf, cap > INT_MAX ? INT_MAX : cap);
            if (n > 0) return n;
            if (n == 0 || n == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY) return 0;
            if (n == MBEDTLS_ERR_SSL_WANT_READ || n == MBEDTLS_ERR_SSL_WANT_WRITE) continue;
#ifdef MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET
            if (n == MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET) {
                c->session_saved = 0; /* a fresh ticket to keep */
                continue;
            }
#endif
            if (n == MBEDTLS_ERR_NET_CONN_RESET) return ASB_ERR_RECV;
            return asb__io_failure(c, ASB_ERR_RECV);
        }
    }
#endif
    {
        long n = asb__sock_recv(c, buf, cap);
        if (n >= 0) return n;
        return asb__io_failure(c, ASB_ERR_RECV);
    }
}

/* Opens a connection to the URL's endpoint: directly or through the
   proxy's CONNECT tunnel, then TLS for https. */
static asb_result asb__conn_open(asb_http_client *cl, const asb_url *u, const char *host,
                                 const char *key, int64_t deadline, const asb_cancel *cancel,
                                 asb__conn **out, asb_error *err) {
    asb__conn *c = (asb__conn *)cl->alloc.alloc_fn(sizeof *c, cl->alloc.user_data);
    asb_result r;
    int via_proxy = !cl->dial && cl->proxy && !(cl->no_proxy && asb__no_proxy_match(cl->no_proxy, u));
    *out = NULL;
    if (!c) return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "http: out of memory");
    memset(c, 0, sizeof *c);
    c->fd = -1;
    c->deadline = deadline;
    c->cancel = cancel;
    c->read_timeout_ms = cl->read_timeout_ms;
    snprintf(c->key, sizeof c->key, "%s", key);
    if (via_proxy) {
        char phost[300], *req;
        const char *colon = strrchr(cl->proxy, ':');
        int pport = atoi(colon + 1);
        asb__http_parser hp;
        size_t used = 0, rcap, rlen;
        const char *lb = u->host_is_ip == 6 ? "[" : "", *rb = u->host_is_ip == 6 ? "]" : "";
        snprintf(phost, sizeof phost, "%.*s", (int)(colon - cl->proxy), cl->proxy);
        r = asb__tcp_connect(c, phost, pport, cl->connect_timeout_ms, err);
        if (r != ASB_OK) {
            if (err && r != ASB_ERR_CANCELLED) err->code = ASB_ERR_PROXY;
            asb__conn_close(cl, c);
            return r == ASB_ERR_TIMEOUT || r == ASB_ERR_CANCELLED ? r : ASB_ERR_PROXY;
        }
        /* sized to fit (the host is at most 253 bytes, the credentials
           ASB__PROXY_AUTH_MAX): no fixed buffer cuts a long CONNECT */
        rcap = 2 * strlen(host) + 128 + (cl->proxy_auth ? strlen(cl->proxy_auth) : 0);
        req = (char *)cl->alloc.alloc_fn(rcap, cl->alloc.user_data);
        if (!req) {
            asb__conn_close(cl, c);
            return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "http: out of memory");
        }
        rlen = (size_t)snprintf(req, rcap,
                                "CONNECT %s%s%s:%d HTTP/1.1\r\nHost: %s%s%s:%d\r\n%s%s%s\r\n", lb,
                                host, rb, u->port, lb, host, rb, u->port,
                                cl->proxy_auth ? "Proxy-Authorization: Basic " : "",
                                cl->proxy_auth ? cl->proxy_auth : "",
                                cl->proxy_auth ? "\r\n" : "");
        r = rlen < rcap ? asb__conn_write(c, req, rlen)
                        : asb__fail(err, ASB_ERR_PROXY, "proxy %s: CONNECT request too long",
                                    cl->proxy);
        asb__wipe(req, rcap); /* it held the credentials */
        cl->alloc.free_fn(req, cl->alloc.user_data);
        asb__hp_init(&hp, 1, cl->max_head, cl->max_headers, &cl->alloc);
        while (r == ASB_OK && hp.state != ASB__HP_DONE) {
            /* read one byte at a time: the tunnel's bytes after the
               response belong to TLS, not to us */
            char ch;
            long n = asb__conn_read(c, &ch, 1);
            if (n <= 0) {
                r = n == 0 ? ASB_ERR_PROXY : (asb_result)n;
                break;
            }
            r = asb__hp_feed(&hp, &ch, 1, &used);
        }
        if (r == ASB_OK && (hp.status < 200 || hp.status > 299)) {
            int st = hp.status;
            asb__hp_free(&hp);
            asb__conn_close(cl, c);
            r = asb__fail(err, ASB_ERR_PROXY, "proxy %s refused CONNECT to %s:%d: status %d",
                          cl->proxy, host, u->port, st);
            if (err) err->http_status = st;
            return r;
        }
        asb__hp_free(&hp);
        if (r != ASB_OK) {
            asb__conn_close(cl, c);
            return asb__fail(err, r == ASB_ERR_TIMEOUT || r == ASB_ERR_CANCELLED ? r : ASB_ERR_PROXY,
                             "proxy %s: CONNECT to %s:%d failed (%s)", cl->proxy, host,
                             u->port, asb_result_str(r));
        }
    } else if (cl->dial) {
        /* the caller's transport (a port-forward stream): a socket made
           non-blocking here, as the I/O below expects */
        r = cl->dial(cl->dial_user, host, u->port, &c->fd, err);
        if (r == ASB_OK && c->fd < 0)
            r = asb__fail(err, ASB_ERR_CONNECT, "http: the dial callback gave no socket");
        if (r == ASB_OK && asb__set_cloexec_nonblock(c->fd) != 0)
            r = asb__fail(err, ASB_ERR_CONNECT, "http: the dial callback's socket: %s",
                          strerror(errno));
        if (r != ASB_OK) {
            asb__conn_close(cl, c);
            return r;
        }
#ifdef SO_NOSIGPIPE
        {
            int one = 1;
            setsockopt(c->fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
        }
#endif
    } else {
        r = asb__tcp_connect(c, host, u->port, cl->connect_timeout_ms, err);
        if (r != ASB_OK) {
            asb__conn_close(cl, c);
            return r;
        }
    }
    if (u->is_https) {
#if ASB_TLS
        asb__tls *t;
        c->use_tls = 1;
        pthread_mutex_lock(&cl->lock);
        if (!cl->tls) {
            asb_tls_config none;
            memset(&none, 0, sizeof none);
            r = asb__tls_create(&none, &cl->alloc, &cl->tls, err);
        }
        t = cl->tls;
        pthread_mutex_unlock(&cl->lock);
        r = t ? asb__tls_handshake(c, t, host, u->port, u->host_is_ip, err) : r;
        if (r != ASB_OK) {
            asb__conn_close(cl, c);
            return r;
        }
#else
        asb__conn_close(cl, c);
        return asb__fail(err, ASB_ERR_TLS_UNAVAILABLE,
                         "https://%s: this build has no TLS (ASB_TLS 0)", host);
#endif
    }
    *out = c;
    return ASB_OK;
}

/* -- one request ------------------------------------------------------------- */

static int asb__method_idempotent(const char *m) {
    return strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0 || strcmp(m, "PUT") == 0 ||
           strcmp(m, "DELETE") == 0 || strcmp(m, "OPTIONS") == 0;
}

/* A Retry-After value in ms from now: delay-seconds, or an IMF-fixdate
   ("Sun, 06 Nov 1994 08:49:37 GMT", RFC 9110 5.6.7; the obsolete date
   forms are not read). A date already past is 0; -1 when the header is
   absent or unreadable (the backoff alone then decides). */
static int64_t asb__retry_after_parse(const char *p, int64_t now) {
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    int64_t secs = 0, t;
    int d, mo, y, h, mi, sec, k;
    while (*p == ' ' || *p == '\t') p++;
    if (*p >= '0' && *p <= '9') {
        for (; *p >= '0' && *p <= '9'; p++)
            if (secs < 100000000) secs = secs * 10 + (*p - '0');
        if (secs > 100000000) secs = 100000000; /* 3 years: "never", not an overflow */
        while (*p == ' ' || *p == '\t') p++;
        return *p ? -1 : secs * 1000;
    }
    /* "Www, DD Mon YYYY HH:MM:SS GMT" */
    if (strlen(p) < 29 || p[3] != ',' || p[4] != ' ' || p[7] != ' ' || p[11] != ' ' ||
        p[16] != ' ' || p[19] != ':' || p[22] != ':' || p[25] != ' ' ||
        strncmp(p + 26, "GMT", 3) != 0)
        return -1;
    for (k = 0; k < 29; k++)
        if ((k == 5 || k == 6 || (k >= 12 && k <= 15) || k == 17 || k == 18 || k == 20 ||
             k == 21 || k == 23 || k == 24) &&
            (p[k] < '0' || p[k] > '9'))
            return -1;
    for (mo = 0; mo < 12; mo++)
        if (strncmp(p + 8, months + 3 * mo, 3) == 0) break;
    k = 29;
    while (p[k] == ' ' || p[k] == '\t') k++;
    if (mo == 12 || p[k]) return -1;
    d = (p[5] - '0') * 10 + (p[6] - '0');
    y = (p[12] - '0') * 1000 + (p[13] - '0') * 100 + (p[14] - '0') * 10 + (p[15] - '0');
    h = (p[17] - '0') * 10 + (p[18] - '0');
    mi = (p[20] - '0') * 10 + (p[21] - '0');
    sec = (p[23] - '0') * 10 + (p[24] - '0');
    if (d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return -1;
    t = asb__days_from_civil(y, mo + 1, d) * 86400 + h * 3600 + mi * 60 + sec;
    return t <= now ? 0 : (t - now) * 1000;
}

static int64_t asb__retry_after_ms(const asb_http_response *resp) {
    const char *v = asb_http_response_header(resp, "Retry-After");
    return v ? asb__retry_after_parse(v, (int64_t)time(NULL)) : -1;
}

static int asb__header_text_ok(const char *s) {
    for (; *s; s++)
        if (*s == '\r' || *s == '\n') return 0;
    return 1;
}

/* Where response body bytes go: the caller's callback for 2xx when
   streaming, else the response buffer up to the cap. */
typedef struct asb__sink_ctx {
    asb__http_parser *hp;
    asb_http_response *resp;
    const asb_http_request *req;
    size_t cap;
    uint64_t delivered;  /* bytes handed to the caller's callback */
    int too_large;
    asb_result user_err;
} asb__sink_ctx;

static asb_result asb__sink(void *ctx, const char *p, size_t n) {
    asb__sink_ctx *s = (asb__sink_ctx *)ctx;
    int ok = s->hp->status >= 200 && s->hp->status < 300;
    if (ok && s->req->on_body) {
        asb_result r = s->req->on_body(s->req->on_body_user, p, n);
        s->delivered += n;
        if (r != ASB_OK) {
            s->user_err = r;
            return ASB_ERR_CANCELLED;
        }
        return ASB_OK;
    }
    if (s->resp->body.len + n > s->cap) {
        s->too_large = 1;
        return ASB_ERR_TOO_LARGE;
    }
    return asb_buf_append(&s->resp->body, p, n);
}

/* Builds "Name: value" pairs for the response out of the parser's head. */
static asb_result asb__resp_take_head(asb_http_response *resp, asb__http_parser *hp) {
    size_t n = 0, i;
    char *s, *end, *line, *nl;
    asb_http_header *hdrs;
    /* headers array first, then the text, in one allocation */
    size_t bytes = (size_t)hp->header_count * sizeof(asb_http_header) + hp->head.len + 1;
    char *mem = (char *)resp->alloc_.alloc_fn(bytes, resp->alloc_.user_data);
    if (!mem) return ASB_ERR_OUT_OF_MEMORY;
    hdrs = (asb_http_header *)(void *)mem;
    s = mem + (size_t)hp->header_count * sizeof(asb_http_header);
    memcpy(s, hp->head.ptr, hp->head.len);
    s[hp->head.len] = '\0';
    end = s + hp->head.len;
    line = (char *)memchr(s, '\n', (size_t)(end - s));
    line = line ? line + 1 : end;
    for (i = 0; line < end && n < (size_t)hp->header_count; line = nl + 1, i++) {
        char *colon, *v, *ve;
        nl = (char *)memchr(line, '\n', (size_t)(end - line));
        if (!nl) break;
        ve = nl;
        if (ve > line && ve[-1] == '\r') ve--;
        if (ve == line) break;
        colon = (char *)memchr(line, ':', (size_t)(ve - line));
        if (!colon) break;
        *colon = '\0';
        v = colon + 1;
        while (v < ve && (*v == ' ' || *v == '\t')) v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
        *ve = '\0';
        hdrs[n].name = line;
        hdrs[n].value = v;
        n++;
    }
    resp->head_ = mem;
    resp->headers = hdrs;
    resp->header_count = n;
    return ASB_OK;
}

typedef struct asb__attempt {
    asb_result r;
    int reached;       /* bytes of the request reached a connected server */
    int stale;         /* failed on a reused connection before any answer:
                          1 closed, 2 no byte within the read timeout (a
                          tunnel that hid the server's close looks so) */
    uint64_t delivered;
} asb__attempt;

/* Writes the request head into buf. */
static asb_result asb__build_head(asb_http_client *cl, const asb_http_request *req,
                                  const char *method, const asb_url *u, asb_buf *b,
                                  asb_error *err) {
    size_t i;
    char tmp[64];
    asb_result r = ASB_OK;
    int has_body = req->body || req->body_read || req->body_len ||
                   strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 ||
                   strcmp(method, "PATCH") == 0;
#define ASB__PUT(s, n) do { if (r == ASB_OK) r = asb_buf_append(b, (s), (n)); } while (0)
#define ASB__PUTS(s) ASB__PUT((s), strlen(s))
    ASB__PUTS(method);
    ASB__PUT(" ", 1);
    if (u->target.len == 0 || u->target.ptr[0] != '/') ASB__PUT("/", 1);
    ASB__PUT(u->target.ptr, u->target.len);
    ASB__PUTS(" HTTP/1.1\r\nHost: ");
    if (u->host_is_ip == 6) ASB__PUT("[", 1);
    ASB__PUT(u->host.ptr, u->host.len);
    if (u->host_is_ip == 6) ASB__PUT("]", 1);
    if (u->port != (u->is_https ? 443 : 80)) {
        snprintf(tmp, sizeof tmp, ":%d", u->port);
        ASB__PUTS(tmp);
    }
    ASB__PUTS("\r\nUser-Agent: ");
    ASB__PUTS(cl->user_agent);
    ASB__PUTS("\r\n");
    if (has_body) {
        snprintf(tmp, sizeof tmp, "Content-Length: %llu\r\n",
                 (unsigned long long)req->body_len);
        ASB__PUTS(tmp);
    }
    for (i = 0; i < req->header_count; i++) {
        const asb_http_header *h = &req->headers[i];
        const char *c;
        int bad = !h->name || !h->value || !*h->name;
        for (c = h->name; !bad && *c; c++)
            if (!asb__is_tchar((unsigned char)*c)) bad = 1;
        if (!bad && !asb__header_text_ok(h->value)) bad = 1;
        if (bad)
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                             "http: request header %zu has an invalid name or a value "
                             "with CR, LF or NUL; nothing was sent",
                             i);
        if (asb__ieq(h->name, strlen(h->name), "host") ||
            asb__ieq(h->name, strlen(h->name), "content-length") ||
            asb__ieq(h->name, strlen(h->name), "transfer-encoding") ||
            asb__ieq(h->name, strlen(h->name), "connection"))
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                             "http: header \"%s\" is set by the library", h->name);
        ASB__PUTS(h->name);
        ASB__PUT(": ", 2);
        ASB__PUTS(h->value);
        ASB__PUT("\r\n", 2);
    }
    ASB__PUT("\r\n", 2);
#undef ASB__PUT
#undef ASB__PUTS
    if (r != ASB_OK) return asb__fail(err, r, "http: out of memory");
    return ASB_OK;
}

/* "GET https://host:port/path" for messages and logs: the path without
   its query (a query may carry tokens), untrusted bytes quoted. */
static void asb__request_label(char *out, size_t cap, const char *method, const asb_url *u) {
    const char *q = (const char *)memchr(u->target.ptr, '?', u->target.len);
    size_t pl = q ? (size_t)(q - u->target.ptr) : u->target.len;
    char host[96], path[200];
    asb__quote(host, sizeof host, u->host.ptr, u->host.len, 80);
    asb__quote(path, sizeof path, u->target.ptr, pl, 120);
    snprintf(out, cap, "%s %s://%s:%d%s", method, u->is_https ? "https" : "http", host, u->port,
             path);
}

static void asb__describe(asb_error *err, asb_result code, const char *method,
                          const asb_url *u, const char *what) {
    char label[320];
    if (!err) return;
    asb__request_label(label, sizeof label, method, u);
    asb__fail(err, code, "%s: %s", label, what);
}

static void asb__attempt_once(asb_http_client *cl, const asb_http_request *req,
                              const char *method, const asb_url *u, const char *host,
                              const char *key, int64_t deadline, asb_http_response *resp,
                              asb_buf *head, asb_error *err, asb__attempt *at) {
    asb__conn *c = NULL;
    asb__http_parser hp;
    asb__sink_ctx sc;
    asb_result r;
    int got_bytes = 0;
    memset(at, 0, sizeof *at);
    c = req->fresh_connection ? NULL : asb__pool_take(cl, key);
    if (!c) {
        r = asb__conn_open(cl, u, host, key, deadline, req->cancel, &c, err);
        if (r != ASB_OK) {
            at->r = r;
            return;
        }
    }
    c->deadline = deadline;
    c->cancel = req->cancel;
    c->read_timeout_ms = req->read_timeout_ms > 0 ? req->read_timeout_ms : cl->read_timeout_ms;
    c->bytes_sent = 0;
    c->timed_out = 0;
    c->cancelled = 0;
    /* head and small bodies go out in one write */
    r = ASB_OK;
    if (req->body && req->body_len <= 65536) {
        size_t hl = head->len;
        r = asb_buf_append(head, req->body, (size_t)req->body_len);
        if (r == ASB_OK) r = asb__conn_write(c, head->ptr, head->len);
        head->len = hl;
    } else {
        r = asb__conn_write(c, head->ptr, head->len);
        if (r == ASB_OK && req->body) {
            r = asb__conn_write(c, req->body, (size_t)req->body_len);
        } else if (r == ASB_OK && req->body_read) {
            /* On the heap: every request path stays within 32 KiB of stack
               (musl's default thread stack is 128 KiB, a caller's may be 64). */
            char *chunk = (char *)cl->alloc.alloc_fn(ASB__BODY_CHUNK, cl->alloc.user_data);
            uint64_t sent = 0;
            if (!chunk) r = ASB_ERR_OUT_OF_MEMORY;
            for (; chunk;) {
                long n = req->body_read(req->body_read_user, chunk, ASB__BODY_CHUNK);
                if (n < 0) {
                    r = ASB_ERR_CANCELLED;
                    asb__describe(err, r, method, u, "the body_read callback aborted");
                    break;
                }
                if (n == 0) break;
                if (sent + (uint64_t)n > req->body_len) {
                    r = ASB_ERR_INVALID_ARGUMENT;
                    asb__describe(err, r, method, u,
                                  "body_read produced more bytes than body_len");
                    break;
                }
                r = asb__conn_write(c, chunk, (size_t)n);
                if (r != ASB_OK) break;
                sent += (uint64_t)n;
            }
            if (chunk)
                cl->alloc.free_fn(chunk, cl->alloc.user_data);
            else
                asb__describe(err, r, method, u, "out of memory for the body");
            if (r == ASB_OK && sent != req->body_len) {
                r = ASB_ERR_INVALID_ARGUMENT;
                asb__describe(err, r, method, u,
                              "body_read produced fewer bytes than body_len");
            }
            if (r != ASB_OK && r != ASB_ERR_SEND && r != ASB_ERR_TIMEOUT) {
                at->reached = 1;
                at->r = r;
                asb__conn_close(cl, c);
                return;
            }
        }
    }
    at->reached = c->bytes_sent > 0;
    if (r != ASB_OK) {
        at->stale = c->reused;
        at->r = r;
        asb__describe(err, r, method, u,
                      r == ASB_ERR_TIMEOUT     ? "timed out sending the request"
                      : r == ASB_ERR_CANCELLED ? "cancelled while sending the request"
                                               : "the connection failed while sending");
        if (err) err->message[sizeof err->message - 1] = '\0';
        asb__conn_close(cl, c);
        return;
    }
    /* the response */
    asb__hp_init(&hp, strcmp(method, "HEAD") == 0, cl->max_head, cl->max_headers, &cl->alloc);
    memset(&sc, 0, sizeof sc);
    sc.hp = &hp;
    sc.resp = resp;
    sc.req = req;
    sc.cap = req->max_body_bytes ? req->max_body_bytes : cl->max_body;
    hp.sink = asb__sink;
    hp.sink_ctx = &sc;
    for (;;) {
        long n;
        size_t used = 0;
        if (c->rpos < c->rlen) {
            r = asb__hp_feed(&hp, c->rbuf + c->rpos, c->rlen - c->rpos, &used);
            c->rpos += used;
            if (r != ASB_OK || hp.state == ASB__HP_DONE) break;
        }
        c->rpos = c->rlen = 0;
        n = asb__conn_read(c, c->rbuf, sizeof c->rbuf);
        if (n > 0) {
            got_bytes = 1;
            c->rlen = (size_t)n;
            continue;
        }
        if (n == 0) {
            r = asb__hp_eof(&hp);
        } else {
            r = (asb_result)n;
        }
        break;
    }
    at->delivered = sc.delivered;
    if (r == ASB_OK && hp.state == ASB__HP_DONE) {
        resp->status = hp.status;
#if ASB_TLS
        if (c->use_tls) asb__tls_session_save(cl->tls, c);
#endif
        r = asb__resp_take_head(resp, &hp);
        if (r == ASB_OK && hp.keep_alive && c->rpos == c->rlen && cl->max_idle > 0) {
            asb__pool_put(cl, c);
            c = NULL;
        }
    } else {
        if (!got_bytes && c->reused && (r == ASB_ERR_RECV || r == ASB_ERR_SEND))
            at->stale = 1;
        /* Not one byte within the read timeout on a pooled connection,
           with time left before the call's deadline: the server may have
           closed it behind a tunnel that did not pass the close on (kwok's
           port-forward). Only an idempotent request is sent again (the
           caller checks): a POST may be running, and is left to its deadline. */
        if (!got_bytes && c->reused && r == ASB_ERR_TIMEOUT && c->timed_out &&
            (c->deadline == 0 || asb__now_ms() < c->deadline))
            at->stale = 2;
        if (r == ASB_ERR_CANCELLED && c->cancelled) {
            asb__describe(err, r, method, u, "cancelled while waiting for the response");
        } else if (r == ASB_ERR_CANCELLED && sc.user_err != ASB_OK) {
            r = sc.user_err;
            asb__describe(err, r, method, u, "the on_body callback stopped the transfer");
        } else if (sc.too_large) {
            char m[120];
            snprintf(m, sizeof m, "response body larger than the %zu-byte cap", sc.cap);
            asb__describe(err, r, method, u, m);
        } else if (r == ASB_ERR_TIMEOUT) {
            asb__describe(err, r, method, u, "timed out waiting for the response");
        } else if (hp.error) {
            asb__describe(err, r, method, u, hp.error);
        } else {
            char m[160];
            snprintf(m, sizeof m, "connection failed while reading the response (%s)",
                     strerror(c->last_errno ? c->last_errno : EPIPE));
            asb__describe(err, r, method, u, m);
        }
        if (hp.status && err) err->http_status = hp.status;
    }
    asb__hp_free(&hp);
    if (c) asb__conn_close(cl, c);
    at->r = r;
}

/* Copies one header of a failed answer into err, bounded and printable. */
static void asb__error_header(char *dst, const asb_http_response *resp, const char *name) {
    const char *v = asb_http_response_header(resp, name);
    size_t i;
    dst[0] = '\0';
    if (!v) return;
    for (i = 0; v[i] && i + 1 < ASB_ERROR_HEADER_SIZE; i++)
        dst[i] = (unsigned char)v[i] < 0x20 || v[i] == 0x7f ? '?' : v[i];
    dst[i] = '\0';
}

/* The headers asb_error keeps (Retry-After, X-Request-ID, Content-Type). */
static void asb__error_headers(asb_error *err, const asb_http_response *resp) {
    if (!err || !resp) return;
    asb__error_header(err->retry_after, resp, "Retry-After");
    asb__error_header(err->request_id, resp, "X-Request-ID");
    asb__error_header(err->content_type, resp, "Content-Type");
}

ASB_API asb_result asb_http_do(asb_http_client *cl, const asb_http_request *req,
                               asb_http_response *resp, asb_error *err) {
    asb_url u;
    asb_result r;
    char host[260], key[ASB__POOL_KEY_SIZE];
    const char *method;
    asb_retry_policy pol;
    asb_buf head;
    int attempt, stale_retried = 0, idem;
    int64_t deadline;
    if (!resp) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "http: NULL response");
    memset(resp, 0, sizeof *resp);
    if (!cl || !req || !req->url)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "http: NULL client or request");
    resp->alloc_ = cl->alloc;
    asb_buf_init(&resp->body, &cl->alloc);
    method = req->method ? req->method : "GET";
    {
        const char *c;
        if (!*method)
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "http: empty method");
        for (c = method; *c; c++)
            if (!asb__is_tchar((unsigned char)*c))
                return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "http: invalid method");
    }
    if (req->body && req->body_read)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "http: give body or body_read, not both");
    r = asb_url_parse(req->url, strlen(req->url), &u, err);
    if (r != ASB_OK) return r;
    snprintf(host, sizeof host, "%.*s", (int)u.host.len, u.host.ptr);
    snprintf(key, sizeof key, "%s://%s:%d", u.is_https ? "https" : "http", host, u.port);
    asb_buf_init(&head, &cl->alloc);
    head.wipe = 1; /* Authorization, Proxy-Authorization, keys in headers */
    r = asb__build_head(cl, req, method, &u, &head, err);
    if (r != ASB_OK) {
        asb_buf_free(&head);
        return r;
    }
    pol = req->retry ? *req->retry : cl->retry;
    if (pol.max_attempts <= 0) pol.max_attempts = 5;
    if (pol.backoff_ms <= 0) pol.backoff_ms = 500;
    if (pol.max_backoff_ms <= 0) pol.max_backoff_ms = 8000;
    if (pol.max_retry_after_ms <= 0) pol.max_retry_after_ms = 60000;
    idem = asb__method_idempotent(method) && !req->body_read;
    deadline = req->timeout_ms > 0 ? asb__now_ms() + req->timeout_ms : 0;
    for (attempt = 1;; attempt++) {
        asb__attempt at;
        int retry = 0;
        int64_t retry_after = -1;
        resp->attempts = attempt;
        resp->body.len = 0;
        if (resp->head_) {
            resp->alloc_.free_fn(resp->head_, resp->alloc_.user_data);
            resp->head_ = NULL;
            resp->headers = NULL;
            resp->header_count = 0;
        }
        if (req->cancel && asb_cancel_is_triggered(req->cancel)) {
            /* before a (re)try: nothing more goes out */
            asb__describe(err, ASB_ERR_CANCELLED, method, &u, "cancelled");
            r = ASB_ERR_CANCELLED;
            break;
        }
        if (cl->hold_on_429) {
            /* another request of this client met a 429: the server asked
               everyone to come back later, not only that request */
            int64_t hold, now = asb__now_ms();
            pthread_mutex_lock(&cl->lock);
            hold = cl->hold_until - now;
            pthread_mutex_unlock(&cl->lock);
            /* spread over half a second more: released together, the
               held requests would meet the next 429 together */
            if (hold > 0) hold += asb__jitter_ms(1000) - 500; /* 0 to 500 */
            if (deadline && now + hold > deadline) hold = deadline - now;
            if (hold > 0 && cl->log.fn) {
                char label[320];
                asb__request_label(label, sizeof label, method, &u);
                asb__log(&cl->log, ASB_LOG_DEBUG, "http.hold",
                         "%s: held %lld ms: the server answered 429 to this client", label,
                         (long long)hold);
            }
            if (hold > 0 && asb__sleep_or_cancel(hold, req->cancel)) {
                asb__describe(err, ASB_ERR_CANCELLED, method, &u,
                              "cancelled while the server asked to wait (429)");
                r = ASB_ERR_CANCELLED;
                break;
            }
        }
        asb__attempt_once(cl, req, method, &u, host, key, deadline, resp, &head, err, &at);
        r = at.r;
        if (r == ASB_OK) {
            int st = resp->status;
            if (st >= 300 && st < 400 && st != 304) {
                const char *loc = asb_http_response_header(resp, "Location");
                char lq[160], m[220];
                asb__quote(lq, sizeof lq, loc ? loc : "", loc ? strlen(loc) : 0, 120);
                snprintf(m, sizeof m, "redirect %d to \"%s\" not followed", st, lq);
                asb__describe(err, ASB_ERR_HTTP_REDIRECT, method, &u, m);
                r = ASB_ERR_HTTP_REDIRECT;
            } else if (st >= 400) {
                char m[96];
                snprintf(m, sizeof m, "status %d", st);
                asb__describe(err, ASB_ERR_HTTP_STATUS, method, &u, m);
                r = ASB_ERR_HTTP_STATUS;
                retry = (idem && (st == 429 || st == 500 || st == 502 || st == 503 ||
                                  st == 504)) ||
                        (st == 429 && pol.retry_429_any_method && !req->body_read);
                if (st == 429 && cl->hold_on_429) {
                    /* every request of the client waits (new ones too):
                       the server's Retry-After, else one second */
                    int64_t ra = asb__retry_after_ms(resp), until;
                    if (ra < 0) ra = 1000;
                    if (ra > pol.max_retry_after_ms) ra = pol.max_retry_after_ms;
                    until = asb__now_ms() + ra;
                    pthread_mutex_lock(&cl->lock);
                    if (until > cl->hold_until) cl->hold_until = until;
                    pthread_mutex_unlock(&cl->lock);
                }
                if (retry) {
                    retry_after = asb__retry_after_ms(resp);
                    if (retry_after > pol.max_retry_after_ms) {
                        /* the server's own word on when to come back is
                           longer than the caller will wait: stop here */
                        snprintf(m, sizeof m, "status %d, Retry-After %lld s (longer than %d ms)",
                                 st, (long long)(retry_after / 1000), pol.max_retry_after_ms);
                        asb__describe(err, ASB_ERR_HTTP_STATUS, method, &u, m);
                        retry = 0;
                    }
                }
            }
            if (r != ASB_OK && err) {
                err->http_status = st;
                err->body_len = resp->body.len < sizeof err->body ? resp->body.len
                                                                   : sizeof err->body;
                if (err->body_len) memcpy(err->body, resp->body.ptr, err->body_len);
                asb__error_headers(err, resp);
            }
        } else if (at.stale && !stale_retried && (idem || !at.reached)) {
            /* the server had closed a pooled connection: once more, fresh,
               not counted as an attempt */
            stale_retried = 1;
            attempt--;
            if (cl->log.fn) {
                char label[320];
                asb__request_label(label, sizeof label, method, &u);
                asb__log(&cl->log, ASB_LOG_DEBUG, "http.stale",
                         at.stale == 2 ? "%s: no answer on a pooled connection within the read "
                                         "timeout, retrying on a new one"
                                       : "%s: pooled connection closed by the server, retrying on a new one",
                         label);
            }
            continue;
        } else if (at.delivered == 0) {
            int conn_failure = r == ASB_ERR_DNS || r == ASB_ERR_CONNECT ||
                               r == ASB_ERR_PROXY || r == ASB_ERR_SEND ||
                               r == ASB_ERR_RECV;
            retry = conn_failure && (idem || !at.reached);
        }
        if (!retry || attempt >= pol.max_attempts) break;
        {
            int64_t wait = pol.backoff_ms;
            int k;
            for (k = 1; k < attempt && wait < pol.max_backoff_ms; k++) wait *= 2;
            if (wait > pol.max_backoff_ms) wait = pol.max_backoff_ms;
            if (!pol.no_jitter) {
                unsigned char rb[2];
                unsigned v = 0;
                if (asb__random_bytes(rb, 2) == ASB_OK) v = (unsigned)(rb[0] << 8 | rb[1]);
                wait = wait / 2 + (int64_t)((uint64_t)(wait / 2) * v / 65535u);
            }
            if (retry_after > wait) wait = retry_after;
            if (retry_after >= 0 && cl->hold_on_429 && resp->status == 429)
                /* an apiserver shedding load says "1" to every refused
                   client at once: come back spread over half of it more,
                   not all in the same millisecond */
                wait = retry_after / 2 + asb__jitter_ms((int)(retry_after < 60000 ? retry_after
                                                                     : 60000)); /* +0 to +50% */
            if (deadline && asb__now_ms() + wait >= deadline) break;
            if (cl->log.fn) {
                char label[320];
                asb__request_label(label, sizeof label, method, &u);
                if (r == ASB_ERR_HTTP_STATUS)
                    asb__log(&cl->log, ASB_LOG_WARN, "http.retry",
                             "%s: status %d, attempt %d of %d; retrying in %lld ms%s", label,
                             resp->status, attempt, pol.max_attempts, (long long)wait,
                             retry_after == wait ? " (its Retry-After)" : "");
                else
                    asb__log(&cl->log, ASB_LOG_WARN, "http.retry",
                             "%s: %s, attempt %d of %d; retrying in %lld ms", label,
                             asb_result_str(r), attempt, pol.max_attempts, (long long)wait);
            }
            if (asb__sleep_or_cancel(wait, req->cancel)) {
                asb__describe(err, ASB_ERR_CANCELLED, method, &u,
                              "cancelled while waiting to retry");
                r = ASB_ERR_CANCELLED;
                break;
            }
        }
    }
    asb_buf_free(&head);
    if (r != ASB_OK && err) {
        /* a server echoing the request's headers into its answer (body,
           Location) must not put the credentials sent into err: the
           value of Authorization and Proxy-Authorization after the
           scheme, and the proxy's credentials */
        size_t i;
        for (i = 0; i < req->header_count; i++) {
            const char *n = req->headers[i].name, *v = req->headers[i].value, *sp;
            if (!n || !v || !(asb__ieq(n, strlen(n), "authorization") ||
                              asb__ieq(n, strlen(n), "proxy-authorization")))
                continue;
            sp = strchr(v, ' ');
            asb__mask_error(err, sp ? sp + 1 : v);
        }
        if (cl->proxy_auth) asb__mask_error(err, cl->proxy_auth);
    }
    return r;
}

ASB_API const char *asb_http_response_header(const asb_http_response *resp,
                                             const char *name) {
    size_t i, n;
    if (!resp || !name) return NULL;
    n = strlen(name);
    for (i = 0; i < resp->header_count; i++)
        if (asb__ieq(name, n, resp->headers[i].name)) return resp->headers[i].value;
    return NULL;
}

ASB_API void asb_http_response_free(asb_http_response *resp) {
    if (!resp) return;
    asb_buf_free(&resp->body);
    if (resp->head_ && resp->alloc_.free_fn)
        resp->alloc_.free_fn(resp->head_, resp->alloc_.user_data);
    resp->head_ = NULL;
    resp->headers = NULL;
    resp->header_count = 0;
}

/* -- multipart --------------------------------------------------------------- */

/* Appends a form-data parameter value as a quoted-string. `"` and `\` are
   backslash-escaped: what both runtimes decode (python-multipart, as the
   upstream runtime uses it, and agentsandbox-runtime undo exactly `\"` and
   `\\`); the HTML form style (`"` as %22) is decoded by neither, so such a
   name would not round-trip. CR and LF stay %0D / %0A (the safe-path rules
   refuse them in file names anyway). */
static asb_result asb__mp_quoted(asb_buf *b, const char *s) {
    asb_result r = asb_buf_append(b, "\"", 1);
    for (; r == ASB_OK && *s; s++) {
        if (*s == '"') r = asb_buf_append(b, "\\\"", 2);
        else if (*s == '\\') r = asb_buf_append(b, "\\\\", 2);
        else if (*s == '\r') r = asb_buf_append(b, "%0D", 3);
        else if (*s == '\n') r = asb_buf_append(b, "%0A", 3);
        else r = asb_buf_append(b, s, 1);
    }
    if (r == ASB_OK) r = asb_buf_append(b, "\"", 1);
    return r;
}

ASB_API asb_result asb_multipart_init(asb_multipart *mp, const char *field,
                                      const char *filename, const asb_allocator *alloc) {
    unsigned char rnd[12];
    char boundary[48];
    asb_result r;
    int i;
    if (!mp || !field || !filename) return ASB_ERR_INVALID_ARGUMENT;
    memset(mp, 0, sizeof *mp);
    r = asb_buf_init(&mp->head, alloc);
    if (r != ASB_OK) return r;
    asb_buf_init(&mp->tail, alloc);
    /* a random boundary: the file's bytes cannot be chosen to match it */
    if (asb__random_bytes(rnd, sizeof rnd) != ASB_OK) return ASB_ERR_IO;
    memcpy(boundary, "asb-", 4);
    for (i = 0; i < 12; i++) {
        boundary[4 + 2 * i] = "0123456789abcdef"[rnd[i] >> 4];
        boundary[5 + 2 * i] = "0123456789abcdef"[rnd[i] & 15];
    }
    boundary[28] = '\0';
    snprintf(mp->content_type, sizeof mp->content_type,
             "multipart/form-data; boundary=%s", boundary);
    r = asb_buf_append(&mp->head, "--", 2);
    if (r == ASB_OK) r = asb_buf_append(&mp->head, boundary, 28);
    if (r == ASB_OK)
        r = asb_buf_append(&mp->head, "\r\nContent-Disposition: form-data; name=", 39);
    if (r == ASB_OK) r = asb__mp_quoted(&mp->head, field);
    if (r == ASB_OK) r = asb_buf_append(&mp->head, "; filename=", 11);
    if (r == ASB_OK) r = asb__mp_quoted(&mp->head, filename);
    if (r == ASB_OK)
        r = asb_buf_append(&mp->head, "\r\nContent-Type: application/octet-stream\r\n\r\n", 44);
    if (r == ASB_OK) r = asb_buf_append(&mp->tail, "\r\n--", 4);
    if (r == ASB_OK) r = asb_buf_append(&mp->tail, boundary, 28);
    if (r == ASB_OK) r = asb_buf_append(&mp->tail, "--\r\n", 4);
    if (r != ASB_OK) asb_multipart_free(mp);
    return r;
}

ASB_API void asb_multipart_free(asb_multipart *mp) {
    if (!mp) return;
    asb_buf_free(&mp->head);
    asb_buf_free(&mp->tail);
}


/* >>http2 ===================================================================
   HTTP/2 (RFC 9113) client: HPACK (RFC 7541), the frame reader, streams,
   flow control, and one I/O thread per connection. The frame reader and
   the HPACK decoder take bytes from anywhere (asb__h2_on_bytes), so they
   are fuzzed without a socket.

   -- HPACK ------------------------------------------------------------------- */

/* RFC 7541 Appendix A. */
static const char *const asb__hpack_static[61][2] = {
    {":authority", ""}, {":method", "GET"}, {":method", "POST"}, {":path", "/"},
    {":path", "/index.html"}, {":scheme", "http"}, {":scheme", "https"},
    {":status", "200"}, {":status", "204"}, {":status", "206"}, {":status", "304"},
    {":status", "400"}, {":status", "404"}, {":status", "500"}, {"accept-charset", ""},
    {"accept-encoding", "gzip, deflate"}, {"accept-language", ""}, {"accept-ranges", ""},
    {"accept", ""}, {"access-control-allow-origin", ""}, {"age", ""}, {"allow", ""},
    {"authorization", ""}, {"cache-control", ""}, {"content-disposition", ""},
    {"content-encoding", ""}, {"content-language", ""}, {"content-length", ""},
    {"content-location", ""}, {"content-range", ""}, {"content-type", ""},
    {"cookie", ""}, {"date", ""}, {"etag", ""}, {"expect", ""}, {"expires", ""},
    {"from", ""}, {"host", ""}, {"if-match", ""}, {"if-modified-since", ""},
    {"if-none-match", ""}, {"if-range", ""}, {"if-unmodified-since", ""},
    {"last-modified", ""}, {"link", ""}, {"location", ""}, {"max-forwards", ""},
    {"proxy-authenticate", ""}, {"proxy-authorization", ""}, {"range", ""},
    {"referer", ""}, {"refresh", ""}, {"retry-after", ""}, {"server", ""},
    {"set-cookie", ""}, {"strict-transport-security", ""}, {"transfer-encoding", ""},
    {"user-agent", ""}, {"vary", ""}, {"via", ""}, {"www-authenticate", ""}};

/* RFC 7541 Appendix B as code lengths per symbol (0..255, 256 = EOS). The
   code is canonical (shorter codes first, equal lengths in symbol order),
   so the lengths alone define it; the decoder rebuilds the codes. */
static const unsigned char asb__huff_len[257] = {
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28,
    30, 28, 28, 28, 28, 28, 28, 28, 28, 28, 6,  10, 10, 12, 13, 6,  8,  11, 10, 10, 8,  11,
    8,  6,  6,  6,  5,  5,  5,  6,  6,  6,  6,  6,  6,  6,  7,  8,  15, 6,  12, 10, 13, 6,
    7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,  7,
    8,  7,  8,  13, 19, 13, 14, 6,  15, 5,  6,  5,  6,  5,  6,  6,  6,  5,  7,  7,  6,  6,
    6,  5,  6,  7,  6,  5,  5,  6,  7,  7,  7,  7,  7,  15, 11, 14, 13, 28, 20, 22, 20, 20,
    22, 22, 22, 23, 22, 23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21,
    22, 23, 22, 23, 23, 24, 22, 21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23,
    21, 21, 22, 21, 23, 22, 23, 23, 20, 22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23,
    22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19, 21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26,
    28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22, 22, 25, 25, 24, 24, 26, 23, 26, 27,
    26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30};

typedef struct asb__hpack_entry {
    size_t nlen, vlen;
    char data[1];           /* name then value, allocated to size */
} asb__hpack_entry;

typedef struct asb__hpack_dec {
    asb_allocator alloc;
    asb__hpack_entry **ring; /* dynamic table, oldest at `first` */
    size_t ring_cap, first, count;
    size_t size;            /* RFC 7541 size: sum of name + value + 32 */
    size_t max_size;        /* current limit (size updates lower it) */
    size_t settings_max;    /* what we advertised (SETTINGS_HEADER_TABLE_SIZE) */
    /* the canonical Huffman code, rebuilt from asb__huff_len */
    uint32_t huff_first[31];
    uint16_t huff_count[31], huff_off[31];
    uint16_t huff_sym[257];
    asb_buf name, value;    /* Huffman-decoded strings */
} asb__hpack_dec;

/* Called for each decoded field; a non-OK return marks the header list
   bad but decoding goes on (the dynamic table must stay in step). */
typedef asb_result (*asb__hpack_emit)(void *ctx, const char *name, size_t nlen,
                                      const char *value, size_t vlen);

static asb_result asb__hpack_dec_init(asb__hpack_dec *d, const asb_allocator *a,
                                      size_t table_size) {
    uint32_t code = 0;
    int len, prev = 0, s, i, n = 0;
    memset(d, 0, sizeof *d);
    d->alloc = *a;
    d->settings_max = d->max_size = table_size;
    d->ring_cap = table_size / 32 + 1;
    d->ring = (asb__hpack_entry **)a->alloc_fn(d->ring_cap * sizeof *d->ring, a->user_data);
    if (!d->ring) return ASB_ERR_OUT_OF_MEMORY;
    asb_buf_init(&d->name, a);
    asb_buf_init(&d->value, a);
    for (len = 1; len <= 30; len++) {
        d->huff_off[len] = (uint16_t)n;
        for (s = 0; s < 257; s++) {
            if (asb__huff_len[s] != len) continue;
            if (n > 0) code = (code + 1) << (len - prev);
            if (d->huff_count[len] == 0) d->huff_first[len] = code;
            prev = len;
            d->huff_count[len]++;
            d->huff_sym[n++] = (uint16_t)s;
        }
    }
    for (i = 0; i < 31; i++)
        if (!d->huff_count[i]) d->huff_first[i] = 0;
    return ASB_OK;
}

static void asb__hpack_evict_one(asb__hpack_dec *d) {
    asb__hpack_entry *e = d->ring[d->first];
    d->size -= e->nlen + e->vlen + 32;
    d->alloc.free_fn(e, d->alloc.user_data);
    d->ring[d->first] = NULL;
    d->first = (d->first + 1) % d->ring_cap;
    d->count--;
}

static void asb__hpack_dec_free(asb__hpack_dec *d) {
    while (d->count) asb__hpack_evict_one(d);
    if (d->ring) d->alloc.free_fn(d->ring, d->alloc.user_data);
    d->ring = NULL;
    asb_buf_free(&d->name);
    asb_buf_free(&d->value);
}

/* Index 1..61 static, then the dynamic table, newest first. */
static int asb__hpack_lookup(const asb__hpack_dec *d, uint64_t idx, const char **n,
                             size_t *nl, const char **v, size_t *vl) {
    if (idx == 0) return -1;
    if (idx <= 61) {
        *n = asb__hpack_static[idx - 1][0];
        *nl = strlen(*n);
        *v = asb__hpack_static[idx - 1][1];
        *vl = strlen(*v);
        return 0;
    }
    idx -= 62;
    if (idx >= d->count) return -1;
    {
        asb__hpack_entry *e = d->ring[(d->first + d->count - 1 - (size_t)idx) % d->ring_cap];
        *n = e->data;
        *nl = e->nlen;
        *v = e->data + e->nlen;
        *vl = e->vlen;
    }
    return 0;
}

/* Adds an entry (copied first: name may point into an entry evicted
   here, RFC 7541 section 4.4). */
static asb_result asb__hpack_add(asb__hpack_dec *d, const char *n, size_t nl, const char *v,
                                 size_t vl) {
    size_t need = nl + vl + 32;
    asb__hpack_entry *e;
    if (need > d->max_size) {
        while (d->count) asb__hpack_evict_one(d);
        return ASB_OK;
    }
    e = (asb__hpack_entry *)d->alloc.alloc_fn(sizeof *e + nl + vl, d->alloc.user_data);
    if (!e) return ASB_ERR_OUT_OF_MEMORY;
    e->nlen = nl;
    e->vlen = vl;
    memcpy(e->data, n, nl);
    memcpy(e->data + nl, v, vl);
    while (d->count && d->size + need > d->max_size) asb__hpack_evict_one(d);
    /* max_size <= settings_max, so at most ring_cap - 1 entries fit */
    d->ring[(d->first + d->count) % d->ring_cap] = e;
    d->count++;
    d->size += need;
    return ASB_OK;
}

/* An integer with an N-bit prefix; values above 2^32 are refused. */
static int asb__hpack_int(const unsigned char **pp, const unsigned char *end, int bits,
                          uint64_t *out) {
    const unsigned char *p = *pp;
    uint64_t mask = ((uint64_t)1 << bits) - 1, v;
    int shift = 0;
    if (p >= end) return -1;
    v = *p++ & mask;
    if (v == mask) {
        for (;;) {
            unsigned char b;
            if (p >= end || shift > 28) return -1;
            b = *p++;
            v += (uint64_t)(b & 0x7f) << shift;
            shift += 7;
            if (!(b & 0x80)) break;
        }
        if (v > 0xffffffffu) return -1;
    }
    *pp = p;
    *out = v;
    return 0;
}

static int asb__huff_decode(asb__hpack_dec *d, const unsigned char *p, size_t n, asb_buf *out) {
    uint32_t code = 0;
    int len = 0;
    size_t i;
    out->len = 0;
    if (asb_buf_reserve(out, n * 8 / 5 + 1) != ASB_OK) return -2;
    for (i = 0; i < n; i++) {
        int bit;
        for (bit = 7; bit >= 0; bit--) {
            code = (code << 1) | (uint32_t)((p[i] >> bit) & 1);
            len++;
            if (d->huff_count[len] && code >= d->huff_first[len] &&
                code - d->huff_first[len] < d->huff_count[len]) {
                unsigned sym = d->huff_sym[d->huff_off[len] + code - d->huff_first[len]];
                if (sym == 256) return -1; /* EOS inside a string */
                out->ptr[out->len++] = (char)sym;
                code = 0;
                len = 0;
            } else if (len >= 30) {
                return -1;
            }
        }
    }
    /* padding: fewer than 8 bits, all ones (a prefix of EOS) */
    if (len > 7 || code != ((uint32_t)1 << len) - 1) return -1;
    out->ptr[out->len] = '\0';
    return 0;
}

/* A string literal: a view of the input, or Huffman-decoded into `buf`. */
static int asb__hpack_str(asb__hpack_dec *d, const unsigned char **pp, const unsigned char *end,
                          asb_buf *buf, const char **s, size_t *sl) {
    uint64_t n;
    int huff;
    if (*pp >= end) return -1;
    huff = (**pp & 0x80) != 0;
    if (asb__hpack_int(pp, end, 7, &n) != 0) return -1;
    if (n > (uint64_t)(end - *pp)) return -1;
    if (huff) {
        int r = asb__huff_decode(d, *pp, (size_t)n, buf);
        if (r != 0) return r;
        *s = buf->ptr;
        *sl = buf->len;
    } else {
        *s = (const char *)*pp;
        *sl = (size_t)n;
    }
    *pp += n;
    return 0;
}

/* Decodes one complete header block. Returns ASB_OK, ASB_ERR_TOO_LARGE
   (the list passed max_list: decoding went on, nothing more emitted),
   the first non-OK result of emit (likewise), or ASB_ERR_HTTP_PROTOCOL
   with *why: a compression error, fatal to the connection. */
static asb_result asb__hpack_decode(asb__hpack_dec *d, const unsigned char *p, size_t n,
                                    size_t max_list, asb__hpack_emit emit, void *ctx,
                                    const char **why) {
    const unsigned char *end = p + n;
    size_t list = 0;
    int fields = 0;
    asb_result res = ASB_OK;
    *why = NULL;
    while (p < end) {
        unsigned char b = *p;
        const char *nm, *vl;
        size_t nl, vll;
        uint64_t idx;
        int add = 0, r;
        if (b & 0x80) {
            if (asb__hpack_int(&p, end, 7, &idx) != 0 ||
                asb__hpack_lookup(d, idx, &nm, &nl, &vl, &vll) != 0) {
                *why = "hpack: bad index";
                return ASB_ERR_HTTP_PROTOCOL;
            }
        } else if ((b & 0xe0) == 0x20) {
            /* a size update, only before the first field */
            if (fields || asb__hpack_int(&p, end, 5, &idx) != 0 || idx > d->settings_max) {
                *why = "hpack: bad dynamic table size update";
                return ASB_ERR_HTTP_PROTOCOL;
            }
            d->max_size = (size_t)idx;
            while (d->count && d->size > d->max_size) asb__hpack_evict_one(d);
            continue;
        } else {
            int bits = (b & 0xc0) == 0x40 ? 6 : 4;
            add = bits == 6;
            if (asb__hpack_int(&p, end, bits, &idx) != 0) {
                *why = "hpack: bad integer";
                return ASB_ERR_HTTP_PROTOCOL;
            }
            if (idx) {
                const char *v0;
                size_t v0l;
                if (asb__hpack_lookup(d, idx, &nm, &nl, &v0, &v0l) != 0) {
                    *why = "hpack: bad index";
                    return ASB_ERR_HTTP_PROTOCOL;
                }
                /* copy: the entry may be evicted by the add below, and a
                   Huffman value reuses no buffer of the name */
                d->name.len = 0;
                if (asb_buf_append(&d->name, nm, nl) != ASB_OK) return ASB_ERR_OUT_OF_MEMORY;
                nm = d->name.ptr;
            } else {
                r = asb__hpack_str(d, &p, end, &d->name, &nm, &nl);
                if (r == -2) return ASB_ERR_OUT_OF_MEMORY;
                if (r != 0) {
                    *why = "hpack: bad name string";
                    return ASB_ERR_HTTP_PROTOCOL;
                }
            }
            r = asb__hpack_str(d, &p, end, &d->value, &vl, &vll);
            if (r == -2) return ASB_ERR_OUT_OF_MEMORY;
            if (r != 0) {
                *why = "hpack: bad value string";
                return ASB_ERR_HTTP_PROTOCOL;
            }
        }
        fields++;
        list += nl + vll + 32;
        if (res == ASB_OK && list > max_list) res = ASB_ERR_TOO_LARGE;
        if (res == ASB_OK) res = emit(ctx, nm, nl, vl, vll);
        if (add && asb__hpack_add(d, nm, nl, vl, vll) != ASB_OK) return ASB_ERR_OUT_OF_MEMORY;
    }
    return res;
}

/* The encoder never indexes (nothing to keep in step) and never uses
   Huffman: an exact static match is one byte, a static name saves the
   name, anything else is a literal. */
static asb_result asb__hpack_put_int(asb_buf *b, unsigned char first, int bits, size_t v) {
    unsigned char tmp[8];
    size_t n = 0, mask = ((size_t)1 << bits) - 1;
    if (v < mask) {
        tmp[n++] = (unsigned char)(first | v);
    } else {
        tmp[n++] = (unsigned char)(first | mask);
        v -= mask;
        while (v >= 128) {
            tmp[n++] = (unsigned char)(0x80 | (v & 0x7f));
            v >>= 7;
        }
        tmp[n++] = (unsigned char)v;
    }
    return asb_buf_append(b, tmp, n);
}

static asb_result asb__hpack_encode(asb_buf *b, const char *name, const char *value) {
    size_t i, nl = strlen(name), vl = strlen(value), name_idx = 0;
    asb_result r;
    for (i = 0; i < 61; i++) {
        if (strcmp(asb__hpack_static[i][0], name) != 0) continue;
        if (strcmp(asb__hpack_static[i][1], value) == 0)
            return asb__hpack_put_int(b, 0x80, 7, i + 1);
        if (!name_idx) name_idx = i + 1;
    }
    /* credentials as "literal never indexed" (RFC 7541 7.1.3): no
       intermediary may keep them in a compression table */
    r = asb__hpack_put_int(b, strcmp(name, "authorization") == 0 ||
                                      strcmp(name, "proxy-authorization") == 0
                                  ? 0x10
                                  : 0x00,
                           4, name_idx);
    if (r == ASB_OK && !name_idx) {
        r = asb__hpack_put_int(b, 0x00, 7, nl);
        if (r == ASB_OK) r = asb_buf_append(b, name, nl);
    }
    if (r == ASB_OK) r = asb__hpack_put_int(b, 0x00, 7, vl);
    if (r == ASB_OK) r = asb_buf_append(b, value, vl);
    return r;
}

/* -- frames, streams, the connection ---------------------------------------- */

enum {
    ASB__H2_DATA = 0, ASB__H2_HEADERS = 1, ASB__H2_PRIORITY = 2, ASB__H2_RST_STREAM = 3,
    ASB__H2_SETTINGS = 4, ASB__H2_PUSH_PROMISE = 5, ASB__H2_PING = 6, ASB__H2_GOAWAY = 7,
    ASB__H2_WINDOW_UPDATE = 8, ASB__H2_CONTINUATION = 9
};
#define ASB__H2_END_STREAM 0x1
#define ASB__H2_ACK 0x1
#define ASB__H2_END_HEADERS 0x4
#define ASB__H2_PADDED 0x8
#define ASB__H2_PRIORITY_FLAG 0x20
#define ASB__H2_MAX_WINDOW 0x7fffffffL
/* Bytes queued for the socket beyond which writers wait for the I/O
   thread: a big upload is paced by the socket, not buffered. */
#define ASB__H2_OUT_CAP ((size_t)1 << 20)
/* Replies the peer makes us queue (PING and SETTINGS ACKs, RST_STREAM)
   that are still unsent: past this the peer is flooding without reading
   (CVE-2019-9512/9515) and the connection ends with ENHANCE_YOUR_CALM.
   nghttp2 uses the same order of magnitude. */
#ifndef ASB_H2_MAX_QUEUED_REPLIES
#define ASB_H2_MAX_QUEUED_REPLIES 1000
#endif
/* Bytes the I/O thread reads per wake-up before it writes, lets callers
   take the lock and looks at `stopping` again. */
#define ASB__H2_READ_BURST ((size_t)256 << 10)
/* The connection window we grant: streams are what bound buffering (each
   to its stream window), so the connection's is given back as soon as
   data arrives and only has to be large enough not to throttle. */
#define ASB__H2_CONN_WINDOW 0x3fffffffL

static const char *asb__h2_error_name(uint32_t code) {
    static const char *const names[] = {
        "NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR",
        "SETTINGS_TIMEOUT", "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM",
        "CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR", "ENHANCE_YOUR_CALM",
        "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED"};
    return code < 14 ? names[code] : "unknown error code";
}

struct asb_h2_stream {
    asb_h2_conn *conn;
    struct asb_h2_stream *next;
    uint32_t id;
    int64_t deadline;       /* 0: none */
    int64_t send_window;    /* may go negative after a SETTINGS change */
    int64_t recv_window;    /* what the peer may still send us */
    uint32_t consumed;      /* read by the caller, not yet given back */
    int blocks;             /* header blocks seen: 1 headers, 2 trailers */
    int status;
    int local_closed, remote_closed;
    int sent_end;           /* we sent END_STREAM (a reset also closes) */
    int cancelled;          /* by us */
    int reset_by_peer;
    uint32_t rst_code;
    asb_result failed;      /* stream-level failure (ASB_OK: none) */
    char fail_msg[160];
    int counted;            /* still counted in conn->active */
    asb_buf hdrs, trls;     /* "name\0value\0" pairs */
    asb_buf data;           /* received body bytes not yet read */
    size_t data_pos;
};

struct asb_h2_conn {
    asb_allocator alloc;
    asb_logger log;
    asb__conn *c;           /* socket and TLS, from >>http; NULL when fuzzing */
#if ASB_TLS
    asb__tls *tls;
#endif
    char authority[300];
    int https;
    pthread_mutex_t mu;
    pthread_cond_t cv;      /* broadcast on every change a waiter may need */
    pthread_t thread;
    int thread_started, stopping;
    int wake[2];            /* a byte here wakes the I/O thread */
    int wake_pending;
    asb_buf out;            /* bytes for the socket, from out_pos on */
    size_t out_pos;
    int replies_queued;     /* control replies queued since the last time */
    size_t replies_end;     /* ... out_pos passed replies_end (all sent) */
    size_t tls_pending;     /* an mbedtls_ssl_write to repeat with this length */
    asb_buf in;             /* incoming bytes: whole frames are taken off */
    size_t in_pos;
    asb__hpack_dec dec;
    asb_buf block;          /* a header block across CONTINUATION */
    uint32_t block_stream;  /* its stream; 0: none in progress */
    int block_end_stream;
    /* settings */
    uint32_t local_max_frame, local_window;
    size_t max_list;
    uint32_t peer_max_frame, peer_initial_window, peer_max_streams;
    int64_t send_window;    /* the connection's, for our DATA */
    int64_t recv_window;
    uint64_t recv_unacked;
    uint32_t next_id, highest_id;
    int active;
    int goaway;             /* received: no new streams */
    uint32_t goaway_last;
    asb_result dead;        /* connection-level failure (ASB_OK: alive) */
    char dead_msg[200];
    asb_h2_stream *streams;
    int tls_error;          /* the mbedTLS code that ended the connection */
};

static void asb__h2_wake(asb_h2_conn *h) {
    if (h->wake[1] >= 0 && !h->wake_pending) {
        char b = 1;
        h->wake_pending = 1;
        if (write(h->wake[1], &b, 1) < 0) { /* full pipe: already awake */
        }
    }
}

/* Drops the consumed front of a buffer read from *pos on: all of it when
   everything was consumed, else by moving the rest down once the front
   is the larger part (so each byte moves a bounded number of times). */
static void asb__h2_compact(asb_buf *b, size_t *pos) {
    if (*pos == 0) return;
    /* the consumed bytes are wiped: they may hold an authorization header */
    if (*pos == b->len) {
        memset(b->ptr, 0, b->len);
        b->len = *pos = 0;
    } else if (*pos >= b->len - *pos) {
        memmove(b->ptr, b->ptr + *pos, b->len - *pos);
        memset(b->ptr + (b->len - *pos), 0, *pos);
        b->len -= *pos;
        *pos = 0;
    }
}

/* Queues one frame (mu held). Out of memory kills the connection. */
static void asb__h2_put_frame(asb_h2_conn *h, int type, int flags, uint32_t sid,
                              const void *payload, size_t len) {
    unsigned char hd[9];
    if (h->dead) return;
    hd[0] = (unsigned char)(len >> 16);
    hd[1] = (unsigned char)(len >> 8);
    hd[2] = (unsigned char)len;
    hd[3] = (unsigned char)type;
    hd[4] = (unsigned char)flags;
    hd[5] = (unsigned char)((sid >> 24) & 0x7f);
    hd[6] = (unsigned char)(sid >> 16);
    hd[7] = (unsigned char)(sid >> 8);
    hd[8] = (unsigned char)sid;
    {
        size_t was = h->out_pos;
        asb__h2_compact(&h->out, &h->out_pos);
        if (was && !h->out_pos) h->replies_end = h->replies_end > was ? h->replies_end - was : 0;
    }
    if (asb_buf_append(&h->out, hd, 9) != ASB_OK ||
        (len && asb_buf_append(&h->out, payload, len) != ASB_OK)) {
        h->dead = ASB_ERR_OUT_OF_MEMORY;
        snprintf(h->dead_msg, sizeof h->dead_msg, "http2: out of memory");
        pthread_cond_broadcast(&h->cv);
        return;
    }
    asb__h2_wake(h);
}

static void asb__h2_put_u32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

static uint32_t asb__h2_u32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void asb__h2_rst(asb_h2_conn *h, uint32_t sid, uint32_t code) {
    unsigned char b[4];
    asb__h2_put_u32(b, code);
    asb__h2_put_frame(h, ASB__H2_RST_STREAM, 0, sid, b, 4);
}

static void asb__h2_window_update(asb_h2_conn *h, uint32_t sid, uint32_t inc) {
    unsigned char b[4];
    asb__h2_put_u32(b, inc & 0x7fffffffu);
    asb__h2_put_frame(h, ASB__H2_WINDOW_UPDATE, 0, sid, b, 4);
}

/* A connection error: GOAWAY with the code, every stream fails. */
static void asb__h2_conn_error(asb_h2_conn *h, uint32_t code, const char *what) {
    unsigned char b[8];
    if (h->dead) return;
    asb__h2_put_u32(b, 0);
    asb__h2_put_u32(b + 4, code);
    asb__h2_put_frame(h, ASB__H2_GOAWAY, 0, 0, b, 8);
    h->dead = ASB_ERR_HTTP_PROTOCOL;
    snprintf(h->dead_msg, sizeof h->dead_msg, "http2: connection error %s: %s",
             asb__h2_error_name(code), what);
    asb__log(&h->log, ASB_LOG_WARN, "http2.error", "%s", h->dead_msg);
    pthread_cond_broadcast(&h->cv);
}

/* Queues a frame the peer asked for by sending one. A peer that sends
   them faster than it reads our answers would grow `out` without end:
   past ASB_H2_MAX_QUEUED_REPLIES unsent ones the connection ends. */
static void asb__h2_put_reply(asb_h2_conn *h, int type, int flags, uint32_t sid,
                              const void *payload, size_t len) {
    char what[120];
    if (h->dead) return;
    if (h->out_pos >= h->replies_end) h->replies_queued = 0; /* all sent */
    if (++h->replies_queued > ASB_H2_MAX_QUEUED_REPLIES) {
        snprintf(what, sizeof what,
                 "flood: more than %d PING/SETTINGS/RST_STREAM replies queued while the peer "
                 "does not read",
                 ASB_H2_MAX_QUEUED_REPLIES);
        asb__h2_conn_error(h, 0xb, what);
        return;
    }
    asb__h2_put_frame(h, type, flags, sid, payload, len);
    h->replies_end = h->out.len;
}

static void asb__h2_uncount(asb_h2_conn *h, asb_h2_stream *s) {
    if (s->counted) {
        s->counted = 0;
        h->active--;
    }
}

/* A stream error: RST_STREAM with the code, the stream fails. */
static void asb__h2_stream_error(asb_h2_conn *h, asb_h2_stream *s, uint32_t code,
                                 asb_result res, const char *what) {
    if (!s->failed) {
        s->failed = res;
        snprintf(s->fail_msg, sizeof s->fail_msg, "http2: stream %u: %s", (unsigned)s->id,
                 what);
    }
    if (!(s->local_closed && s->remote_closed) && !s->reset_by_peer && !s->cancelled) {
        unsigned char b[4];
        asb__h2_put_u32(b, code);
        asb__h2_put_reply(h, ASB__H2_RST_STREAM, 0, s->id, b, 4);
        s->cancelled = 1; /* nothing more goes out on it */
    }
    asb__h2_uncount(h, s);
    pthread_cond_broadcast(&h->cv);
}

static asb_h2_stream *asb__h2_find(asb_h2_conn *h, uint32_t sid) {
    asb_h2_stream *s;
    for (s = h->streams; s; s = s->next)
        if (s->id == sid) return s;
    return NULL;
}

/* Header fields into a stream's list, checked as RFC 9113 8.2 and 8.3
   ask of a response: lowercase names, no connection-specific fields,
   :status only, pseudo-fields first and never in trailers. */
typedef struct asb__h2_hctx {
    asb_buf *list;
    int trailers;
    int regular_seen;
    int status;
    const char *bad;
} asb__h2_hctx;

static asb_result asb__h2_emit(void *ctx, const char *n, size_t nl, const char *v, size_t vl) {
    asb__h2_hctx *x = (asb__h2_hctx *)ctx;
    size_t i;
    if (nl == 0) {
        x->bad = "empty header name";
        return ASB_ERR_HTTP_PROTOCOL;
    }
    for (i = 0; i < nl; i++) {
        unsigned char c = (unsigned char)n[i];
        if ((c >= 'A' && c <= 'Z') || c <= 0x20 || c >= 0x7f || (c == ':' && i > 0)) {
            x->bad = "bad character in a header name";
            return ASB_ERR_HTTP_PROTOCOL;
        }
    }
    for (i = 0; i < vl; i++)
        if (v[i] == '\0' || v[i] == '\r' || v[i] == '\n') {
            x->bad = "CR, LF or NUL in a header value";
            return ASB_ERR_HTTP_PROTOCOL;
        }
    if (n[0] == ':') {
        int st = 0;
        if (x->trailers || x->regular_seen || x->status || nl != 7 ||
            memcmp(n, ":status", 7) != 0 || vl != 3) {
            x->bad = "unexpected pseudo-header";
            return ASB_ERR_HTTP_PROTOCOL;
        }
        for (i = 0; i < 3; i++) {
            if (v[i] < '0' || v[i] > '9') {
                x->bad = "bad :status";
                return ASB_ERR_HTTP_PROTOCOL;
            }
            st = st * 10 + (v[i] - '0');
        }
        if (st < 100) {
            x->bad = "bad :status";
            return ASB_ERR_HTTP_PROTOCOL;
        }
        x->status = st;
        return ASB_OK;
    }
    x->regular_seen = 1;
    if ((nl == 10 && memcmp(n, "connection", 10) == 0) ||
        (nl == 17 && memcmp(n, "transfer-encoding", 17) == 0) ||
        (nl == 10 && memcmp(n, "keep-alive", 10) == 0) ||
        (nl == 7 && memcmp(n, "upgrade", 7) == 0)) {
        x->bad = "connection-specific header field";
        return ASB_ERR_HTTP_PROTOCOL;
    }
    if (!x->list) return ASB_OK;
    if (asb_buf_append(x->list, n, nl) != ASB_OK || asb_buf_append(x->list, "", 1) != ASB_OK ||
        asb_buf_append(x->list, v, vl) != ASB_OK || asb_buf_append(x->list, "", 1) != ASB_OK)
        return ASB_ERR_OUT_OF_MEMORY;
    return ASB_OK;
}

/* A complete header block for stream sid. */
static void asb__h2_on_block(asb_h2_conn *h, uint32_t sid, int end_stream) {
    asb_h2_stream *s = asb__h2_find(h, sid);
    asb__h2_hctx x;
    asb_buf tmp;
    const char *why = NULL;
    asb_result r;
    memset(&x, 0, sizeof x);
    asb_buf_init(&tmp, &h->alloc);
    /* A block for a stream we already dropped is still decoded: the
       dynamic table must stay in step with the peer's. */
    if (s && !s->failed && !s->cancelled) {
        x.trailers = s->blocks >= 1;
        x.list = &tmp;
    }
    r = asb__hpack_decode(&h->dec, (const unsigned char *)h->block.ptr, h->block.len,
                          h->max_list, asb__h2_emit, &x, &why);
    h->block.len = 0;
    h->block_stream = 0;
    if (why) {
        asb_buf_free(&tmp);
        asb__h2_conn_error(h, 9, why); /* COMPRESSION_ERROR */
        return;
    }
    if (r == ASB_ERR_OUT_OF_MEMORY) {
        asb_buf_free(&tmp);
        asb__h2_conn_error(h, 2, "out of memory");
        return;
    }
    if (!x.list) {
        asb_buf_free(&tmp);
        return;
    }
    if (r == ASB_OK && !x.trailers && !x.status) {
        x.bad = "response without :status";
        r = ASB_ERR_HTTP_PROTOCOL;
    }
    if (r == ASB_OK && x.trailers && !end_stream) {
        x.bad = "trailers without END_STREAM";
        r = ASB_ERR_HTTP_PROTOCOL;
    }
    if (r == ASB_OK && x.status >= 100 && x.status < 200) {
        /* informational: dropped; 101 is not allowed in HTTP/2 */
        asb_buf_free(&tmp);
        if (end_stream || x.status == 101)
            asb__h2_stream_error(h, s, 1, ASB_ERR_HTTP_PROTOCOL, "bad informational response");
        return;
    }
    if (r != ASB_OK) {
        char m[120];
        asb_buf_free(&tmp);
        if (r == ASB_ERR_TOO_LARGE)
            snprintf(m, sizeof m, "header list larger than %lu bytes", (unsigned long)h->max_list);
        else
            snprintf(m, sizeof m, "malformed response: %s", x.bad ? x.bad : "bad header");
        asb__h2_stream_error(h, s, r == ASB_ERR_TOO_LARGE ? 8 : 1, r, m);
        return;
    }
    if (!x.trailers) {
        asb_buf_free(&s->hdrs);
        s->hdrs = tmp;
        s->status = x.status;
        s->blocks = 1;
    } else {
        asb_buf_free(&s->trls);
        s->trls = tmp;
        s->blocks = 2;
    }
    if (end_stream) {
        s->remote_closed = 1;
        if (s->local_closed) asb__h2_uncount(h, s);
    }
    pthread_cond_broadcast(&h->cv);
}

static void asb__h2_apply_settings(asb_h2_conn *h, const unsigned char *p, size_t len) {
    size_t i;
    for (i = 0; i + 6 <= len; i += 6) {
        unsigned id = (unsigned)p[i] << 8 | p[i + 1];
        uint32_t v = asb__h2_u32(p + i + 2);
        if (id == 2 && v > 1) {
            asb__h2_conn_error(h, 1, "SETTINGS_ENABLE_PUSH not 0 or 1");
            return;
        }
        if (id == 3) h->peer_max_streams = v;
        if (id == 4) {
            asb_h2_stream *s;
            int64_t delta = (int64_t)v - (int64_t)h->peer_initial_window;
            if (v > ASB__H2_MAX_WINDOW) {
                asb__h2_conn_error(h, 3, "SETTINGS_INITIAL_WINDOW_SIZE above 2^31-1");
                return;
            }
            for (s = h->streams; s; s = s->next) {
                s->send_window += delta;
                if (s->send_window > ASB__H2_MAX_WINDOW) {
                    asb__h2_conn_error(h, 3, "a stream window above 2^31-1");
                    return;
                }
            }
            h->peer_initial_window = v;
        }
        if (id == 5) {
            if (v < 16384 || v > 16777215) {
                asb__h2_conn_error(h, 1, "SETTINGS_MAX_FRAME_SIZE out of range");
                return;
            }
            h->peer_max_frame = v;
        }
        /* 1 (header table size): our encoder never indexes; 6 (max header
           list size): advisory; others: unknown, ignored as required */
    }
    asb__h2_put_reply(h, ASB__H2_SETTINGS, ASB__H2_ACK, 0, NULL, 0);
    pthread_cond_broadcast(&h->cv);
}

/* One complete frame. */
static void asb__h2_on_frame(asb_h2_conn *h, int type, int flags, uint32_t sid,
                             const unsigned char *p, size_t len) {
    asb_h2_stream *s;
    size_t pad = 0;
    if (h->block_stream && (type != ASB__H2_CONTINUATION || sid != h->block_stream)) {
        asb__h2_conn_error(h, 1, "a header block interrupted by another frame");
        return;
    }
    switch (type) {
    case ASB__H2_DATA:
    case ASB__H2_HEADERS:
        if (sid == 0) {
            asb__h2_conn_error(h, 1, "DATA or HEADERS on stream 0");
            return;
        }
        if ((sid & 1) == 0 || sid > h->highest_id) {
            asb__h2_conn_error(h, 1, "DATA or HEADERS on a stream we never opened");
            return;
        }
        if (flags & ASB__H2_PADDED) {
            if (len < 1 || (size_t)p[0] >= len) {
                asb__h2_conn_error(h, 1, "padding longer than the frame");
                return;
            }
            pad = p[0];
            p++;
            len--;
            len -= pad;
        }
        s = asb__h2_find(h, sid);
        if (type == ASB__H2_DATA) {
            size_t whole = len + pad + ((flags & ASB__H2_PADDED) ? 1 : 0);
            if ((int64_t)whole > h->recv_window) {
                asb__h2_conn_error(h, 3, "DATA beyond the connection window");
                return;
            }
            h->recv_window -= (int64_t)whole;
            h->recv_unacked += whole;
            if (h->recv_unacked >= (uint64_t)ASB__H2_CONN_WINDOW / 2) {
                asb__h2_window_update(h, 0, (uint32_t)h->recv_unacked);
                h->recv_window += (int64_t)h->recv_unacked;
                h->recv_unacked = 0;
            }
            if (!s || s->failed || s->cancelled) return; /* dropped by us */
            if (s->remote_closed) {
                asb__h2_stream_error(h, s, 5, ASB_ERR_HTTP_PROTOCOL, "DATA after END_STREAM");
                return;
            }
            if ((int64_t)whole > s->recv_window) {
                asb__h2_stream_error(h, s, 3, ASB_ERR_HTTP_PROTOCOL,
                                     "DATA beyond the stream window");
                return;
            }
            if (s->blocks != 1) {
                asb__h2_stream_error(h, s, 1, ASB_ERR_HTTP_PROTOCOL,
                                     s->blocks ? "DATA after trailers" : "DATA before HEADERS");
                return;
            }
            s->recv_window -= (int64_t)whole;
            s->consumed += (uint32_t)(whole - len); /* padding is read at once */
            /* what was read is reclaimed: a reader that is never quite
               drained must not make the buffer grow with the transfer */
            asb__h2_compact(&s->data, &s->data_pos);
            if (len && asb_buf_append(&s->data, p, len) != ASB_OK) {
                asb__h2_stream_error(h, s, 2, ASB_ERR_OUT_OF_MEMORY, "out of memory");
                return;
            }
            if (flags & ASB__H2_END_STREAM) {
                s->remote_closed = 1;
                if (s->local_closed) asb__h2_uncount(h, s);
            }
            pthread_cond_broadcast(&h->cv);
            return;
        }
        if (flags & ASB__H2_PRIORITY_FLAG) {
            if (len < 5) {
                asb__h2_conn_error(h, 6, "HEADERS too short for its priority");
                return;
            }
            p += 5;
            len -= 5;
        }
        if (s && s->remote_closed && !s->failed) {
            asb__h2_stream_error(h, s, 5, ASB_ERR_HTTP_PROTOCOL, "HEADERS after END_STREAM");
            s = NULL; /* the block is still decoded below */
        }
        if (len > h->max_list) {
            asb__h2_conn_error(h, 11, "header block larger than the header list cap");
            return;
        }
        h->block.len = 0;
        if (asb_buf_append(&h->block, p, len) != ASB_OK) {
            asb__h2_conn_error(h, 2, "out of memory");
            return;
        }
        h->block_end_stream = (flags & ASB__H2_END_STREAM) != 0;
        h->block_stream = sid;
        if (flags & ASB__H2_END_HEADERS) asb__h2_on_block(h, sid, h->block_end_stream);
        return;
    case ASB__H2_CONTINUATION:
        if (!h->block_stream || sid != h->block_stream) {
            asb__h2_conn_error(h, 1, "CONTINUATION without HEADERS");
            return;
        }
        if (h->block.len + len > h->max_list) {
            /* a compressed block never outgrows its decoded list much;
               refusing here bounds the buffer */
            asb__h2_conn_error(h, 11, "header block larger than the header list cap");
            return;
        }
        if (asb_buf_append(&h->block, p, len) != ASB_OK) {
            asb__h2_conn_error(h, 2, "out of memory");
            return;
        }
        if (flags & ASB__H2_END_HEADERS) asb__h2_on_block(h, sid, h->block_end_stream);
        return;
    case ASB__H2_PRIORITY:
        if (sid == 0) {
            asb__h2_conn_error(h, 1, "PRIORITY on stream 0");
            return;
        }
        if (len != 5) asb__h2_conn_error(h, 6, "PRIORITY not 5 bytes");
        return;
    case ASB__H2_RST_STREAM:
        if (sid == 0 || len != 4) {
            asb__h2_conn_error(h, sid ? 6 : 1, "bad RST_STREAM");
            return;
        }
        if ((sid & 1) == 0 || sid > h->highest_id) {
            asb__h2_conn_error(h, 1, "RST_STREAM on an idle stream");
            return;
        }
        s = asb__h2_find(h, sid);
        if (s && !s->reset_by_peer) {
            s->reset_by_peer = 1;
            s->rst_code = asb__h2_u32(p);
            /* a reset after the whole response (gRPC servers send
               NO_ERROR when we had not half-closed) loses nothing */
            if (!s->remote_closed && !s->failed) {
                s->failed = ASB_ERR_HTTP_PROTOCOL;
                snprintf(s->fail_msg, sizeof s->fail_msg, "http2: stream %u reset by the peer: %s",
                         (unsigned)sid, asb__h2_error_name(s->rst_code));
            }
            s->local_closed = s->remote_closed = 1;
            asb__h2_uncount(h, s);
            pthread_cond_broadcast(&h->cv);
        }
        return;
    case ASB__H2_SETTINGS:
        if (sid != 0) {
            asb__h2_conn_error(h, 1, "SETTINGS on a stream");
            return;
        }
        if (flags & ASB__H2_ACK) {
            if (len) asb__h2_conn_error(h, 6, "SETTINGS ACK with a payload");
            return;
        }
        if (len % 6) {
            asb__h2_conn_error(h, 6, "SETTINGS not a multiple of 6 bytes");
            return;
        }
        asb__h2_apply_settings(h, p, len);
        return;
    case ASB__H2_PUSH_PROMISE:
        asb__h2_conn_error(h, 1, "PUSH_PROMISE although push is disabled");
        return;
    case ASB__H2_PING:
        if (sid != 0 || len != 8) {
            asb__h2_conn_error(h, sid ? 1 : 6, "bad PING");
            return;
        }
        if (!(flags & ASB__H2_ACK)) asb__h2_put_reply(h, ASB__H2_PING, ASB__H2_ACK, 0, p, 8);
        return;
    case ASB__H2_GOAWAY:
        if (sid != 0 || len < 8) {
            asb__h2_conn_error(h, sid ? 1 : 6, "bad GOAWAY");
            return;
        }
        {
            uint32_t last = asb__h2_u32(p) & 0x7fffffffu, code = asb__h2_u32(p + 4);
            char dbg[80];
            asb__quote(dbg, sizeof dbg, (const char *)p + 8, len - 8, 60);
            if (!h->goaway || last < h->goaway_last) h->goaway_last = last;
            h->goaway = 1;
            asb__log(&h->log, code ? ASB_LOG_WARN : ASB_LOG_INFO, "http2.goaway",
                     "GOAWAY %s, last stream %u%s%s", asb__h2_error_name(code),
                     (unsigned)last, len > 8 ? ": " : "", dbg);
            for (s = h->streams; s; s = s->next) {
                if (s->id > last && !s->failed && !(s->local_closed && s->remote_closed)) {
                    /* never processed: safe to send again elsewhere */
                    s->failed = ASB_ERR_CLOSED;
                    snprintf(s->fail_msg, sizeof s->fail_msg,
                             "http2: stream %u refused by GOAWAY (%s): never processed",
                             (unsigned)s->id, asb__h2_error_name(code));
                    s->local_closed = s->remote_closed = 1;
                    asb__h2_uncount(h, s);
                }
            }
            pthread_cond_broadcast(&h->cv);
        }
        return;
    case ASB__H2_WINDOW_UPDATE: {
        uint32_t inc;
        if (len != 4) {
            asb__h2_conn_error(h, 6, "WINDOW_UPDATE not 4 bytes");
            return;
        }
        inc = asb__h2_u32(p) & 0x7fffffffu;
        if (sid == 0) {
            if (inc == 0) {
                asb__h2_conn_error(h, 1, "WINDOW_UPDATE of 0");
                return;
            }
            h->send_window += inc;
            if (h->send_window > ASB__H2_MAX_WINDOW) {
                asb__h2_conn_error(h, 3, "connection window above 2^31-1");
                return;
            }
        } else {
            if ((sid & 1) == 0 || sid > h->highest_id) {
                asb__h2_conn_error(h, 1, "WINDOW_UPDATE on an idle stream");
                return;
            }
            s = asb__h2_find(h, sid);
            if (!s || s->failed || s->cancelled) return;
            if (inc == 0) {
                asb__h2_stream_error(h, s, 1, ASB_ERR_HTTP_PROTOCOL, "WINDOW_UPDATE of 0");
                return;
            }
            s->send_window += inc;
            if (s->send_window > ASB__H2_MAX_WINDOW) {
                asb__h2_stream_error(h, s, 3, ASB_ERR_HTTP_PROTOCOL,
                                     "stream window above 2^31-1");
                return;
            }
        }
        pthread_cond_broadcast(&h->cv);
        return;
    }
    default:
        return; /* unknown frame types are ignored (RFC 9113 5.5) */
    }
}

/* Feeds received bytes: whole frames are handled, a partial one kept. */
static void asb__h2_on_bytes(asb_h2_conn *h, const void *bytes, size_t n) {
    if (h->dead) return;
    if (asb_buf_append(&h->in, bytes, n) != ASB_OK) {
        asb__h2_conn_error(h, 2, "out of memory");
        return;
    }
    while (!h->dead && h->in.len - h->in_pos >= 9) {
        const unsigned char *f = (const unsigned char *)h->in.ptr + h->in_pos;
        size_t len = (size_t)f[0] << 16 | (size_t)f[1] << 8 | f[2];
        if (len > h->local_max_frame) {
            asb__h2_conn_error(h, 6, "frame larger than SETTINGS_MAX_FRAME_SIZE");
            return;
        }
        if (h->in.len - h->in_pos < 9 + len) break;
        h->in_pos += 9 + len;
        asb__h2_on_frame(h, f[3], f[4], asb__h2_u32(f + 5) & 0x7fffffffu, f + 9, len);
    }
    if (h->in_pos == h->in.len) {
        h->in.len = h->in_pos = 0;
    } else if (h->in_pos > 65536) {
        memmove(h->in.ptr, h->in.ptr + h->in_pos, h->in.len - h->in_pos);
        h->in.len -= h->in_pos;
        h->in_pos = 0;
    }
}

/* The connection object without a socket (the fuzzer uses it as is). */
static asb_result asb__h2_conn_new(const asb_h2_desc *d, const asb_allocator *a,
                                   asb_h2_conn **out) {
    asb_h2_conn *h = (asb_h2_conn *)a->alloc_fn(sizeof *h, a->user_data);
    pthread_condattr_t ca;
    *out = NULL;
    if (!h) return ASB_ERR_OUT_OF_MEMORY;
    memset(h, 0, sizeof *h);
    h->alloc = *a;
    h->log = d->log;
    h->wake[0] = h->wake[1] = -1;
    /* defaults, in one place */
    h->local_window = d->stream_window ? d->stream_window : (uint32_t)1 << 20;
    h->local_max_frame = d->max_frame_size ? d->max_frame_size : 16384;
    h->max_list = d->max_header_list_bytes ? d->max_header_list_bytes : 65536;
    h->peer_max_frame = 16384;
    h->peer_initial_window = 65535;
    h->peer_max_streams = 0xffffffffu;
    h->send_window = 65535;
    h->recv_window = ASB__H2_CONN_WINDOW;
    h->next_id = 1;
    asb_buf_init(&h->out, a);
    h->out.wipe = 1; /* header blocks: authorization and other credentials */
    asb_buf_init(&h->in, a);
    asb_buf_init(&h->block, a);
    pthread_mutex_init(&h->mu, NULL);
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&h->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (asb__hpack_dec_init(&h->dec, a, 4096) != ASB_OK) {
        asb_h2_conn_free(h);
        return ASB_ERR_OUT_OF_MEMORY;
    }
    *out = h;
    return ASB_OK;
}

/* Our preface, SETTINGS and the connection window, queued. */
static void asb__h2_start(asb_h2_conn *h) {
    unsigned char st[24];
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    asb_buf_append(&h->out, preface, 24);
    st[0] = 0; st[1] = 2; asb__h2_put_u32(st + 2, 0);  /* no push */
    st[6] = 0; st[7] = 4; asb__h2_put_u32(st + 8, h->local_window);
    st[12] = 0; st[13] = 5; asb__h2_put_u32(st + 14, h->local_max_frame);
    st[18] = 0; st[19] = 6; asb__h2_put_u32(st + 20, (uint32_t)(h->max_list > 0xffffffffu ? 0xffffffffu : h->max_list));
    asb__h2_put_frame(h, ASB__H2_SETTINGS, 0, 0, st, 24);
    asb__h2_window_update(h, 0, (uint32_t)(ASB__H2_CONN_WINDOW - 65535));
}

/* Waits on the condition until the deadline (0: none): 0 woken, 1 timed out. */
static int asb__h2_wait(asb_h2_conn *h, int64_t deadline) {
    struct timespec ts;
    int64_t ms;
    if (!deadline) {
        pthread_cond_wait(&h->cv, &h->mu);
        return 0;
    }
    ms = deadline - asb__now_ms();
    if (ms <= 0) return 1;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait(&h->cv, &h->mu, &ts);
    return 0;
}

/* -- socket I/O: one thread per connection owns the socket --------------------- */

#if ASB_TLS
static int asb__h2_bio_send(void *ctx, const unsigned char *buf, size_t len) {
    asb__conn *c = (asb__conn *)ctx;
#ifdef MSG_NOSIGNAL
    ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL);
#else
    ssize_t n = send(c->fd, buf, len, 0);
#endif
    if (n >= 0) return (int)n;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return MBEDTLS_ERR_SSL_WANT_WRITE;
    return MBEDTLS_ERR_NET_SEND_FAILED;
}
static int asb__h2_bio_recv(void *ctx, unsigned char *buf, size_t len) {
    asb__conn *c = (asb__conn *)ctx;
    ssize_t n = recv(c->fd, buf, len, 0);
    if (n >= 0) return (int)n;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
        return MBEDTLS_ERR_SSL_WANT_READ;
    return MBEDTLS_ERR_NET_RECV_FAILED;
}
#endif

/* Non-blocking read: >0 bytes, 0 nothing now, -1 closed or failed. */
static long asb__h2_read_some(asb_h2_conn *h, char *buf, size_t cap) {
    asb__conn *c = h->c;
#if ASB_TLS
    if (c->use_tls) {
        for (;;) {
            int n = mbedtls_ssl_read(&c->ssl, (unsigned char *)buf, cap > INT_MAX ? INT_MAX : cap);
            if (n > 0) return n;
            if (n == MBEDTLS_ERR_SSL_WANT_READ || n == MBEDTLS_ERR_SSL_WANT_WRITE) return 0;
#ifdef MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET
            /* TLS 1.3: a ticket, not data; records behind it may already
               be buffered, so read on rather than wait for the socket */
            if (n == MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET) continue;
#endif
            h->tls_error = n;
            return -1;
        }
    }
#endif
    {
        ssize_t n = recv(c->fd, buf, cap, 0);
        if (n > 0) return (long)n;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
        return -1;
    }
}

/* Non-blocking write of queued bytes: 0 ok (maybe partial), -1 failed. */
static int asb__h2_write_some(asb_h2_conn *h) {
    asb__conn *c = h->c;
    while (h->out_pos < h->out.len) {
        size_t left = h->out.len - h->out_pos;
        long n;
#if ASB_TLS
        if (c->use_tls) {
            size_t len = h->tls_pending ? h->tls_pending : (left > 16384 ? 16384 : left);
            int r = mbedtls_ssl_write(&c->ssl, (const unsigned char *)h->out.ptr + h->out_pos, len);
            if (r == MBEDTLS_ERR_SSL_WANT_WRITE || r == MBEDTLS_ERR_SSL_WANT_READ) {
                h->tls_pending = len;
                return 0;
            }
#ifdef MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET
            if (r == MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET) {
                /* mbedTLS 3.x with TLS 1.3 reports a ticket that arrived
                   while writing: the same write again */
                h->tls_pending = len;
                continue;
            }
#endif
            if (r <= 0) {
                h->tls_error = r;
                return -1;
            }
            h->tls_pending = 0;
            n = r;
        } else
#endif
        {
#ifdef MSG_NOSIGNAL
            ssize_t k = send(c->fd, h->out.ptr + h->out_pos, left, MSG_NOSIGNAL);
#else
            ssize_t k = send(c->fd, h->out.ptr + h->out_pos, left, 0);
#endif
            if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
            if (k <= 0) return -1;
            n = (long)k;
        }
        h->out_pos += (size_t)n;
    }
    if (h->out.len) memset(h->out.ptr, 0, h->out.len); /* sent headers may hold credentials */
    h->out.len = h->out_pos = h->replies_end = 0;
    return 0;
}

static void asb__h2_io_failed(asb_h2_conn *h, const char *what) {
    if (!h->dead) {
        h->dead = ASB_ERR_RECV;
        if (h->tls_error)
            snprintf(h->dead_msg, sizeof h->dead_msg, "http2: %s (mbedTLS -0x%04x)", what,
                     (unsigned)-h->tls_error);
        else
            snprintf(h->dead_msg, sizeof h->dead_msg, "http2: %s", what);
        asb__log(&h->log, ASB_LOG_WARN, "http2.closed", "%s", h->dead_msg);
    }
    pthread_cond_broadcast(&h->cv);
}

static void *asb__h2_io(void *arg) {
    asb_h2_conn *h = (asb_h2_conn *)arg;
    char *buf = (char *)h->alloc.alloc_fn(65536, h->alloc.user_data);
    int more_in = 0; /* a burst ended early: bytes may wait (also inside TLS) */
    pthread_mutex_lock(&h->mu);
    if (!buf) asb__h2_io_failed(h, "out of memory");
    while (!h->stopping && buf) {
        struct pollfd pfd[2];
        int want_out = h->out.len > h->out_pos, closed = 0;
        /* no reading while the peer does not take what we queued (the
           writers' cap is ASB__H2_OUT_CAP; twice that is never normal),
           nor once the connection failed: only our GOAWAY goes out */
        int want_in = !h->dead && h->out.len - h->out_pos <= 2 * ASB__H2_OUT_CAP;
        size_t burst = 0;
        pthread_mutex_unlock(&h->mu);
        pfd[0].fd = h->c->fd;
        pfd[0].events = (short)((want_in ? POLLIN : 0) | (want_out ? POLLOUT : 0));
        pfd[0].revents = 0;
        pfd[1].fd = h->wake[0];
        pfd[1].events = POLLIN;
        pfd[1].revents = 0;
        if (poll(pfd, 2, want_in && more_in ? 0 : -1) < 0 && errno != EINTR) {
            pthread_mutex_lock(&h->mu);
            asb__h2_io_failed(h, "poll failed");
            break;
        }
        pthread_mutex_lock(&h->mu);
        if (pfd[1].revents) {
            char junk[64];
            while (read(h->wake[0], junk, sizeof junk) > 0) {
            }
            h->wake_pending = 0;
        }
        if (h->stopping) break;
        if (want_in && (more_in || (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)))) {
            /* a bounded burst: a peer that keeps the socket full must not
               keep the lock (and our answers) from everyone else */
            while (burst < ASB__H2_READ_BURST && !h->dead && !h->stopping) {
                long n = asb__h2_read_some(h, buf, 65536);
                if (n == 0) break;
                if (n < 0) {
                    closed = 1;
                    break;
                }
                burst += (size_t)n;
                asb__h2_on_bytes(h, buf, (size_t)n);
            }
            more_in = burst >= ASB__H2_READ_BURST;
        }
        /* after a connection error our GOAWAY still goes out */
        if (h->out.len > h->out_pos && asb__h2_write_some(h) != 0) {
            asb__h2_io_failed(h, "connection lost while sending");
            break;
        }
        pthread_cond_broadcast(&h->cv); /* writers wait for room */
        if (closed) {
            asb__h2_io_failed(h, h->goaway ? "connection closed by the peer after GOAWAY"
                                           : "connection closed by the peer");
            break;
        }
        if (h->dead && h->out.len == h->out_pos) break;
    }
    pthread_mutex_unlock(&h->mu);
    if (buf) h->alloc.free_fn(buf, h->alloc.user_data);
    return NULL;
}

static void asb__h2_close_socket(asb_h2_conn *h) {
    asb__conn *c = h->c;
    if (!c) return;
#if ASB_TLS
    if (c->tls_ready) {
        mbedtls_ssl_free(&c->ssl);
        c->tls_ready = 0;
    }
#endif
    if (c->fd >= 0) close(c->fd);
    h->alloc.free_fn(c, h->alloc.user_data);
    h->c = NULL;
}

ASB_API asb_result asb_h2_connect(const asb_h2_desc *desc, asb_h2_conn **out, asb_error *err) {
    asb_allocator a;
    asb_h2_conn *h;
    asb_url u;
    asb_result r;
    char host[260];
    int timeout;
    if (!out) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "http2: NULL out");
    *out = NULL;
    if (!desc || !desc->url)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "http2: no url");
    if (asb__allocator_resolve(desc->allocator, &a) != ASB_OK)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "allocator: give all three functions or none");
    if ((desc->stream_window && desc->stream_window < 65535) ||
        desc->stream_window > ASB__H2_MAX_WINDOW ||
        (desc->max_frame_size && (desc->max_frame_size < 16384 || desc->max_frame_size > 16777215)))
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "http2: stream_window or max_frame_size out of range");
    r = asb_url_parse(desc->url, strlen(desc->url), &u, err);
    if (r != ASB_OK) return r;
    snprintf(host, sizeof host, "%.*s", (int)u.host.len, u.host.ptr);
    r = asb__h2_conn_new(desc, &a, &h);
    if (r != ASB_OK) return asb__fail(err, r, "http2: out of memory");
    h->https = u.is_https;
    snprintf(h->authority, sizeof h->authority, "%s%s%s:%d", u.host_is_ip == 6 ? "[" : "", host,
             u.host_is_ip == 6 ? "]" : "", u.port);
    h->c = (asb__conn *)a.alloc_fn(sizeof *h->c, a.user_data);
    if (!h->c || asb__pipe_cloexec(h->wake) != 0) {
        if (h->c) h->wake[0] = h->wake[1] = -1;
        asb_h2_conn_free(h);
        return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "http2: out of memory or descriptors");
    }
    memset(h->c, 0, sizeof *h->c);
    h->c->fd = -1;
    asb__set_cloexec_nonblock(h->wake[0]);
    asb__set_cloexec_nonblock(h->wake[1]);
    timeout = desc->connect_timeout_ms > 0 ? desc->connect_timeout_ms : 10000;
    h->c->deadline = asb__now_ms() + timeout;
    h->c->read_timeout_ms = timeout;
    if (desc->dial) {
        r = desc->dial(desc->dial_user_data, host, u.port, &h->c->fd, err);
        if (r == ASB_OK && (h->c->fd < 0 || asb__set_cloexec_nonblock(h->c->fd) != 0))
            r = asb__fail(err, ASB_ERR_CONNECT, "http2: the dial callback gave no usable socket");
    } else {
        r = asb__tcp_connect(h->c, host, u.port, timeout, err);
    }
    if (r == ASB_OK && u.is_https) {
#if ASB_TLS
        static const char *h2_alpn[] = {"h2", NULL};
        const char *got;
        r = asb__tls_create(&desc->tls, &a, &h->tls, err);
        if (r == ASB_OK) {
            mbedtls_ssl_conf_alpn_protocols(&h->tls->conf, h2_alpn);
            snprintf(h->c->key, sizeof h->c->key, "h2:%.280s", h->authority);
            h->c->use_tls = 1;
            r = asb__tls_handshake(h->c, h->tls, host, u.port, u.host_is_ip, err);
            if (r == ASB_ERR_TLS_HANDSHAKE && err) {
                /* the usual cause here: a server refusing ALPN h2 */
                size_t l = strlen(err->message);
                snprintf(err->message + l, sizeof err->message - l,
                         " (ALPN offered only h2: does the server speak HTTP/2?)");
            }
        }
        if (r == ASB_OK) {
            got = mbedtls_ssl_get_alpn_protocol(&h->c->ssl);
            if (!got || strcmp(got, "h2") != 0)
                r = asb__fail(err, ASB_ERR_HTTP_PROTOCOL,
                              "http2: %s did not choose h2 in ALPN (it chose %s)", h->authority,
                              got ? got : "nothing");
            else
                mbedtls_ssl_set_bio(&h->c->ssl, h->c, asb__h2_bio_send, asb__h2_bio_recv, NULL);
        }
#else
        r = asb__fail(err, ASB_ERR_TLS_UNAVAILABLE, "https://%s: this build has no TLS (ASB_TLS 0)",
                      host);
#endif
    }
    if (r != ASB_OK) {
        asb_h2_conn_free(h);
        return r;
    }
    h->c->deadline = 0;
    pthread_mutex_lock(&h->mu);
    asb__h2_start(h);
    pthread_mutex_unlock(&h->mu);
    if (pthread_create(&h->thread, NULL, asb__h2_io, h) != 0) {
        asb_h2_conn_free(h);
        return asb__fail(err, ASB_ERR_IO, "http2: cannot start the I/O thread");
    }
    h->thread_started = 1;
    *out = h;
    return ASB_OK;
}

ASB_API void asb_h2_conn_free(asb_h2_conn *h) {
    if (!h) return;
    if (h->thread_started) {
        pthread_mutex_lock(&h->mu);
        if (!h->dead) {
            unsigned char b[8];
            asb__h2_put_u32(b, 0);
            asb__h2_put_u32(b + 4, 0);
            asb__h2_put_frame(h, ASB__H2_GOAWAY, 0, 0, b, 8);
        }
        h->stopping = 1;
        asb__h2_wake(h);
        pthread_mutex_unlock(&h->mu);
        pthread_join(h->thread, NULL);
        /* a best-effort flush of the GOAWAY, never waiting on the peer */
        if (h->c && h->c->fd >= 0 && !h->dead) asb__h2_write_some(h);
    }
    asb__h2_close_socket(h);
#if ASB_TLS
    if (h->tls) asb__tls_free(h->tls, &h->alloc);
#endif
    if (h->wake[0] >= 0) close(h->wake[0]);
    if (h->wake[1] >= 0) close(h->wake[1]);
    while (h->streams) { /* streams the caller forgot: unlinked, still theirs */
        h->streams->conn = NULL;
        h->streams = h->streams->next;
    }
    asb__hpack_dec_free(&h->dec);
    asb_buf_free(&h->out);
    asb_buf_free(&h->in);
    asb_buf_free(&h->block);
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    h->alloc.free_fn(h, h->alloc.user_data);
}

ASB_API int asb_h2_conn_usable(asb_h2_conn *h) {
    int ok;
    if (!h) return 0;
    pthread_mutex_lock(&h->mu);
    ok = !h->dead && !h->goaway && h->next_id <= ASB__H2_MAX_WINDOW;
    pthread_mutex_unlock(&h->mu);
    return ok;
}

static int asb__h2_header_ok(const char *n, const char *v) {
    const char *p;
    if (!n || !v || !*n) return 0;
    for (p = n; *p; p++)
        if ((*p >= 'A' && *p <= 'Z') || (unsigned char)*p <= 0x20 || *p == 0x7f || *p == ':')
            return 0;
    for (p = v; *p; p++)
        if (*p == '\r' || *p == '\n') return 0;
    return 1;
}

static asb_result asb__h2_conn_fail(asb_h2_conn *h, asb_error *err) {
    return asb__fail(err, h->dead, "%s", h->dead_msg);
}

/* Registers a stream (mu held). */
static asb_h2_stream *asb__h2_stream_new(asb_h2_conn *h, uint32_t id) {
    asb_h2_stream *s = (asb_h2_stream *)h->alloc.alloc_fn(sizeof *s, h->alloc.user_data);
    if (!s) return NULL;
    memset(s, 0, sizeof *s);
    s->conn = h;
    s->id = id;
    s->send_window = h->peer_initial_window;
    s->recv_window = h->local_window;
    asb_buf_init(&s->hdrs, &h->alloc);
    asb_buf_init(&s->trls, &h->alloc);
    asb_buf_init(&s->data, &h->alloc);
    s->next = h->streams;
    h->streams = s;
    s->counted = 1;
    h->active++;
    if (id > h->highest_id) h->highest_id = id;
    return s;
}

ASB_API asb_result asb_h2_stream_open(asb_h2_conn *h, const asb_h2_request *req,
                                      asb_h2_stream **out, asb_error *err) {
    asb_buf blk;
    asb_result r = ASB_OK;
    asb_h2_stream *s;
    int64_t deadline;
    size_t i, off;
    char m[80];
    if (!out) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "http2: NULL out");
    *out = NULL;
    if (!h || !req) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "http2: NULL argument");
    if ((req->header_count && !req->headers) ||
        (req->path && (req->path[0] != '/' || strpbrk(req->path, " \r\n") != NULL)) ||
        (req->method && !asb__h2_header_ok("m", req->method)) ||
        (req->authority && !asb__h2_header_ok("a", req->authority)))
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "http2: bad method, path or authority");
    for (i = 0; i < req->header_count; i++)
        if (!asb__h2_header_ok(req->headers[i].name, req->headers[i].value))
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                             "http2: header %lu: bad name (lowercase token) or value "
                             "(CR, LF)", (unsigned long)i);
    deadline = req->timeout_ms > 0 ? asb__now_ms() + req->timeout_ms : 0;
    asb_buf_init(&blk, &h->alloc);
    blk.wipe = 1; /* it may hold authorization */
    r = asb__hpack_encode(&blk, ":method", req->method ? req->method : "GET");
    if (r == ASB_OK) r = asb__hpack_encode(&blk, ":scheme", h->https ? "https" : "http");
    if (r == ASB_OK) r = asb__hpack_encode(&blk, ":path", req->path ? req->path : "/");
    if (r == ASB_OK)
        r = asb__hpack_encode(&blk, ":authority", req->authority ? req->authority : h->authority);
    for (i = 0; r == ASB_OK && i < req->header_count; i++)
        r = asb__hpack_encode(&blk, req->headers[i].name, req->headers[i].value);
    if (r != ASB_OK) {
        asb_buf_free(&blk);
        return asb__fail(err, r, "http2: out of memory");
    }
    pthread_mutex_lock(&h->mu);
    for (;;) {
        if (h->dead) {
            r = asb__h2_conn_fail(h, err);
            break;
        }
        if (h->goaway || h->next_id > ASB__H2_MAX_WINDOW) {
            r = asb__fail(err, ASB_ERR_CLOSED,
                          "http2: the server sent GOAWAY: no new streams on this connection");
            break;
        }
        if ((uint32_t)h->active < h->peer_max_streams) break;
        if (asb__h2_wait(h, deadline)) {
            r = asb__fail(err, ASB_ERR_TIMEOUT,
                          "http2: timed out waiting under the server's stream limit (%u)",
                          (unsigned)h->peer_max_streams);
            break;
        }
    }
    if (r != ASB_OK) {
        pthread_mutex_unlock(&h->mu);
        asb_buf_free(&blk);
        return r;
    }
    s = asb__h2_stream_new(h, h->next_id);
    if (!s) {
        pthread_mutex_unlock(&h->mu);
        asb_buf_free(&blk);
        return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "http2: out of memory");
    }
    h->next_id += 2;
    s->deadline = deadline;
    /* HEADERS then CONTINUATION, back to back in the queue */
    for (off = 0;;) {
        size_t n = blk.len - off > h->peer_max_frame ? h->peer_max_frame : blk.len - off;
        int last = off + n == blk.len;
        int flags = (last ? ASB__H2_END_HEADERS : 0) |
                    (off == 0 && req->end_stream ? ASB__H2_END_STREAM : 0);
        asb__h2_put_frame(h, off == 0 ? ASB__H2_HEADERS : ASB__H2_CONTINUATION, flags, s->id,
                          blk.ptr + off, n);
        off += n;
        if (last) break;
    }
    if (req->end_stream) s->local_closed = s->sent_end = 1;
    pthread_mutex_unlock(&h->mu);
    asb_buf_free(&blk);
    snprintf(m, sizeof m, "%s", req->path ? req->path : "/");
    asb__log(&h->log, ASB_LOG_DEBUG, "http2.stream", "stream %u opened: %s %s", (unsigned)s->id,
             req->method ? req->method : "GET", m);
    *out = s;
    return ASB_OK;
}

/* Why a stream cannot go on (mu held), or ASB_OK. */
static asb_result asb__h2_stream_check(asb_h2_stream *s, asb_error *err) {
    asb_h2_conn *h = s->conn;
    if (!h) return asb__fail(err, ASB_ERR_CLOSED, "http2: the connection was freed");
    if (s->cancelled && !s->failed)
        return asb__fail(err, ASB_ERR_CANCELLED, "http2: stream %u cancelled", (unsigned)s->id);
    if (s->failed) return asb__fail(err, s->failed, "%s", s->fail_msg);
    if (h->dead && !(s->remote_closed && s->local_closed)) return asb__h2_conn_fail(h, err);
    return ASB_OK;
}

ASB_API asb_result asb_h2_stream_write(asb_h2_stream *s, const void *data, size_t len,
                                       int end_stream, asb_error *err) {
    asb_h2_conn *h;
    const char *p = (const char *)data;
    asb_result r = ASB_OK;
    if (!s || (len && !data)) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "http2: NULL argument");
    h = s->conn;
    if (!h) return asb__fail(err, ASB_ERR_CLOSED, "http2: the connection was freed");
    pthread_mutex_lock(&h->mu);
    if (s->sent_end) {
        pthread_mutex_unlock(&h->mu);
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "http2: the request body already ended");
    }
    for (;;) {
        size_t n;
        int64_t room;
        r = asb__h2_stream_check(s, err);
        if (r != ASB_OK) break;
        if (s->remote_closed) {
            /* the response is complete: the server wants no more body */
            break;
        }
        room = s->send_window < h->send_window ? s->send_window : h->send_window;
        if (len > 0 && (room <= 0 || h->out.len - h->out_pos > ASB__H2_OUT_CAP)) {
            if (asb__h2_wait(h, s->deadline)) {
                r = asb__fail(err, ASB_ERR_TIMEOUT,
                              "http2: stream %u: timed out waiting for the peer's window",
                              (unsigned)s->id);
                break;
            }
            continue;
        }
        n = len;
        if ((int64_t)n > room) n = (size_t)room;
        if (n > h->peer_max_frame) n = h->peer_max_frame;
        s->send_window -= (int64_t)n;
        h->send_window -= (int64_t)n;
        asb__h2_put_frame(h, ASB__H2_DATA, end_stream && n == len ? ASB__H2_END_STREAM : 0, s->id,
                          p, n);
        if (n) p += n; /* p may be NULL for an empty end */
        len -= n;
        if (len == 0) {
            if (end_stream) {
                s->local_closed = s->sent_end = 1;
                if (s->remote_closed) asb__h2_uncount(h, s);
            }
            break;
        }
    }
    pthread_mutex_unlock(&h->mu);
    return r;
}

ASB_API asb_result asb_h2_stream_wait_headers(asb_h2_stream *s, asb_error *err) {
    asb_h2_conn *h;
    asb_result r = ASB_OK;
    if (!s) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "http2: NULL stream");
    h = s->conn;
    if (!h) return asb__fail(err, ASB_ERR_CLOSED, "http2: the connection was freed");
    pthread_mutex_lock(&h->mu);
    while (s->blocks == 0) {
        r = asb__h2_stream_check(s, err);
        if (r != ASB_OK) break;
        if (s->remote_closed) {
            r = asb__fail(err, ASB_ERR_HTTP_PROTOCOL, "http2: stream %u ended without headers",
                          (unsigned)s->id);
            break;
        }
        if (asb__h2_wait(h, s->deadline)) {
            r = asb__fail(err, ASB_ERR_TIMEOUT, "http2: stream %u: timed out waiting for headers",
                          (unsigned)s->id);
            break;
        }
    }
    pthread_mutex_unlock(&h->mu);
    return r;
}

ASB_API int asb_h2_stream_status(asb_h2_stream *s) {
    int st;
    if (!s || !s->conn) return 0;
    pthread_mutex_lock(&s->conn->mu);
    st = s->status;
    pthread_mutex_unlock(&s->conn->mu);
    return st;
}

static int asb__h2_lookup(asb_h2_stream *s, const asb_buf *list, const char *name, asb_str *value) {
    size_t i = 0;
    int found = 0;
    if (!s || !name || !s->conn) return 0;
    pthread_mutex_lock(&s->conn->mu);
    while (i < list->len) {
        const char *n = list->ptr + i;
        size_t nl = strlen(n);
        const char *v = n + nl + 1;
        size_t vl = strlen(v);
        if (strcmp(n, name) == 0) {
            if (value) {
                value->ptr = v;
                value->len = vl;
            }
            found = 1;
            break;
        }
        i += nl + vl + 2;
    }
    pthread_mutex_unlock(&s->conn->mu);
    return found;
}

ASB_API int asb_h2_stream_header(asb_h2_stream *s, const char *name, asb_str *value) {
    return s ? asb__h2_lookup(s, &s->hdrs, name, value) : 0;
}
ASB_API int asb_h2_stream_trailer(asb_h2_stream *s, const char *name, asb_str *value) {
    return s ? asb__h2_lookup(s, &s->trls, name, value) : 0;
}

ASB_API asb_result asb_h2_stream_read(asb_h2_stream *s, void *buf, size_t cap, size_t *n,
                                      asb_error *err) {
    asb_h2_conn *h;
    asb_result r = ASB_OK;
    if (n) *n = 0;
    if (!s || !buf || !n || !cap) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "http2: NULL argument");
    h = s->conn;
    if (!h) return asb__fail(err, ASB_ERR_CLOSED, "http2: the connection was freed");
    pthread_mutex_lock(&h->mu);
    for (;;) {
        size_t have = s->data.len - s->data_pos;
        if (have) {
            size_t k = have < cap ? have : cap;
            memcpy(buf, s->data.ptr + s->data_pos, k);
            s->data_pos += k;
            *n = k;
            s->consumed += (uint32_t)k;
            /* give the window back in halves: fewer frames, never stalled */
            if (!s->remote_closed && !s->cancelled && !s->failed &&
                s->consumed >= h->local_window / 2) {
                asb__h2_window_update(h, s->id, s->consumed);
                s->recv_window += s->consumed;
                s->consumed = 0;
            }
            break;
        }
        r = asb__h2_stream_check(s, err);
        if (r != ASB_OK) break;
        if (s->remote_closed) break; /* the end: *n == 0 */
        if (asb__h2_wait(h, s->deadline)) {
            r = asb__fail(err, ASB_ERR_TIMEOUT, "http2: stream %u: timed out reading",
                          (unsigned)s->id);
            break;
        }
    }
    pthread_mutex_unlock(&h->mu);
    return r;
}

ASB_API void asb_h2_stream_cancel(asb_h2_stream *s) {
    asb_h2_conn *h;
    if (!s || !(h = s->conn)) return;
    pthread_mutex_lock(&h->mu);
    if (!s->cancelled) {
        s->cancelled = 1;
        if (!(s->local_closed && s->remote_closed) && !s->reset_by_peer && !h->dead)
            asb__h2_rst(h, s->id, 8); /* CANCEL */
        asb__h2_uncount(h, s);
        pthread_cond_broadcast(&h->cv);
    }
    pthread_mutex_unlock(&h->mu);
}

ASB_API void asb_h2_stream_free(asb_h2_stream *s) {
    asb_h2_conn *h;
    if (!s) return;
    h = s->conn;
    if (h) {
        asb_h2_stream **pp;
        pthread_mutex_lock(&h->mu);
        if (!s->cancelled && !(s->local_closed && s->remote_closed) && !s->reset_by_peer &&
            !h->dead)
            asb__h2_rst(h, s->id, 8);
        asb__h2_uncount(h, s);
        for (pp = &h->streams; *pp; pp = &(*pp)->next)
            if (*pp == s) {
                *pp = s->next;
                break;
            }
        pthread_cond_broadcast(&h->cv);
        pthread_mutex_unlock(&h->mu);
    }
    asb_buf_free(&s->hdrs);
    asb_buf_free(&s->trls);
    asb_buf_free(&s->data);
    s->hdrs.alloc.free_fn(s, s->hdrs.alloc.user_data);
}

/* >>grpc ====================================================================
   gRPC over the HTTP/2 streams: the 5-byte message prefix, te: trailers,
   grpc-timeout, grpc-status / grpc-message from trailers or a
   trailers-only response, and cancellation as RST_STREAM(CANCEL). */

static const char *asb__grpc_code_name(int code) {
    static const char *const names[] = {
        "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND",
        "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
        "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
        "UNAUTHENTICATED"};
    return code >= 0 && code <= 16 ? names[code] : "UNKNOWN";
}

/* Reassembles length-prefixed messages from body bytes in any chunking. */
typedef struct asb__grpc_deframer {
    unsigned char hdr[5];
    size_t hdr_have;
    size_t need;            /* bytes of the current message still missing */
    int in_msg;
    size_t max;
    asb_buf msg;
} asb__grpc_deframer;

typedef int (*asb__grpc_sink)(void *ctx, const char *msg, size_t len);

/* ASB_OK; ASB_ERR_HTTP_PROTOCOL (compressed flag: we never offer an
   encoding), ASB_ERR_TOO_LARGE, ASB_ERR_OUT_OF_MEMORY, or ASB_ERR_CANCELLED
   when the sink returned non-zero. */
static asb_result asb__grpc_feed(asb__grpc_deframer *d, const char *p, size_t n,
                                 asb__grpc_sink sink, void *ctx) {
    while (n > 0 || (d->in_msg && d->need == 0)) {
        if (!d->in_msg) {
            size_t k = 5 - d->hdr_have;
            if (k > n) k = n;
            memcpy(d->hdr + d->hdr_have, p, k);
            d->hdr_have += k;
            p += k;
            n -= k;
            if (d->hdr_have < 5) return ASB_OK;
            if (d->hdr[0] == 1) return ASB_ERR_HTTP_PROTOCOL;
            if (d->hdr[0] > 1) return ASB_ERR_HTTP_PROTOCOL;
            d->need = asb__h2_u32(d->hdr + 1);
            if (d->need > d->max) return ASB_ERR_TOO_LARGE;
            d->in_msg = 1;
            d->msg.len = 0;
            if (asb_buf_reserve(&d->msg, d->need) != ASB_OK) return ASB_ERR_OUT_OF_MEMORY;
        }
        if (d->need) {
            size_t k = d->need < n ? d->need : n;
            memcpy(d->msg.ptr + d->msg.len, p, k);
            d->msg.len += k;
            d->need -= k;
            p += k;
            n -= k;
        }
        if (d->need == 0) {
            d->in_msg = 0;
            d->hdr_have = 0;
            if (sink(ctx, d->msg.ptr ? d->msg.ptr : "", d->msg.len) != 0) return ASB_ERR_CANCELLED;
        }
    }
    return ASB_OK;
}

struct asb_grpc_call {
    asb_h2_stream *s;
    asb_allocator alloc;
    size_t max_msg;
    int64_t deadline;
    int grpc_status;
    int ran;
    int cancel_requested;   /* under the connection's lock */
    char method[128];
};

static size_t asb__grpc_timeout(char *out, size_t cap, int ms) {
    /* at most 8 digits (gRPC's HTTP/2 spec) */
    if (ms < 100000000) return (size_t)snprintf(out, cap, "%dm", ms);
    return (size_t)snprintf(out, cap, "%dS", ms / 1000);
}

ASB_API asb_result asb_grpc_call_start(asb_h2_conn *conn, const asb_grpc_call_desc *desc,
                                       const void *req, size_t req_len, asb_grpc_call **out,
                                       asb_error *err) {
    asb_h2_header hdrs[40];
    asb_h2_request hr;
    asb_grpc_call *call;
    char tmo[24];
    unsigned char pfx[5];
    size_t i, nh = 0;
    asb_result r;
    if (!out) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "grpc: NULL out");
    *out = NULL;
    if (!conn || !desc || !desc->method || desc->method[0] != '/' || (req_len && !req))
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "grpc: a connection and a method \"/pkg.Service/Method\" are required");
    if (desc->metadata_count > 32 || (desc->metadata_count && !desc->metadata))
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "grpc: at most 32 metadata entries");
    if (req_len > 0xffffffffu)
        return asb__fail(err, ASB_ERR_TOO_LARGE, "grpc: a request message above 4 GiB");
    call = (asb_grpc_call *)conn->alloc.alloc_fn(sizeof *call, conn->alloc.user_data);
    if (!call) return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "grpc: out of memory");
    memset(call, 0, sizeof *call);
    call->alloc = conn->alloc;
    call->grpc_status = -1;
    call->max_msg = desc->max_message_bytes ? desc->max_message_bytes : (size_t)4 << 20;
    snprintf(call->method, sizeof call->method, "%s", desc->method);
    hdrs[nh].name = "content-type";
    hdrs[nh++].value = "application/grpc";
    hdrs[nh].name = "te";
    hdrs[nh++].value = "trailers";
    if (desc->timeout_ms > 0) {
        asb__grpc_timeout(tmo, sizeof tmo, desc->timeout_ms);
        hdrs[nh].name = "grpc-timeout";
        hdrs[nh++].value = tmo;
    }
    hdrs[nh].name = "user-agent";
    hdrs[nh++].value = "agentsandbox.h/" ASB_VERSION_STRING;
    for (i = 0; i < desc->metadata_count; i++) hdrs[nh++] = desc->metadata[i];
    memset(&hr, 0, sizeof hr);
    hr.method = "POST";
    hr.path = desc->method;
    hr.headers = hdrs;
    hr.header_count = nh;
    hr.timeout_ms = desc->timeout_ms;
    r = asb_h2_stream_open(conn, &hr, &call->s, err);
    if (r == ASB_OK) {
        call->deadline = call->s->deadline;
        pfx[0] = 0;
        asb__h2_put_u32(pfx + 1, (uint32_t)req_len);
        r = asb_h2_stream_write(call->s, pfx, 5, 0, err);
        if (r == ASB_OK) r = asb_h2_stream_write(call->s, req, req_len, 1, err);
    }
    if (r != ASB_OK) {
        asb_grpc_call_free(call);
        return r;
    }
    *out = call;
    return ASB_OK;
}

/* percent-decoding of grpc-message; a bad escape stays as it is */
static void asb__grpc_message(char *out, size_t cap, const char *v, size_t n) {
    size_t i, o = 0;
    for (i = 0; i < n && o + 1 < cap; i++) {
        unsigned char c = (unsigned char)v[i];
        if (c == '%' && i + 2 < n && asb__hexval((unsigned char)v[i + 1]) >= 0 &&
            asb__hexval((unsigned char)v[i + 2]) >= 0) {
            c = (unsigned char)(asb__hexval((unsigned char)v[i + 1]) * 16 +
                                asb__hexval((unsigned char)v[i + 2]));
            i += 2;
        }
        out[o++] = (char)(c < 0x20 || c == 0x7f ? '?' : c);
    }
    out[o] = '\0';
}

typedef struct asb__grpc_run {
    const asb_grpc_handlers *h;
    asb_grpc_call *call;
    long count;
} asb__grpc_run;

/* Another thread may cancel at any time. */
static int asb__grpc_cancelled(asb_grpc_call *call) {
    int c;
    if (!call->s->conn) return call->cancel_requested;
    pthread_mutex_lock(&call->s->conn->mu);
    c = call->cancel_requested;
    pthread_mutex_unlock(&call->s->conn->mu);
    return c;
}

static int asb__grpc_deliver(void *ctx, const char *msg, size_t len) {
    asb__grpc_run *x = (asb__grpc_run *)ctx;
    x->count++;
    if (asb__grpc_cancelled(x->call)) return 1;
    return x->h && x->h->on_message ? x->h->on_message(x->h->user_data, msg, len) : 0;
}

/* The HTTP/2 reset code as a gRPC status (gRPC's PROTOCOL-HTTP2 doc). */
static int asb__grpc_from_rst(uint32_t code) {
    switch (code) {
    case 7: return 14;  /* REFUSED_STREAM: UNAVAILABLE */
    case 8: return 1;   /* CANCEL: CANCELLED */
    case 11: return 8;  /* ENHANCE_YOUR_CALM: RESOURCE_EXHAUSTED */
    case 12: return 7;  /* INADEQUATE_SECURITY: PERMISSION_DENIED */
    default: return 13; /* INTERNAL */
    }
}

static asb_result asb__grpc_status_result(asb_grpc_call *call, int code, const char *msg,
                                          size_t mlen, asb_error *err) {
    char m[ASB_ERROR_MESSAGE_SIZE - 80];
    asb_result r = code == 4 ? ASB_ERR_TIMEOUT : code == 1 ? ASB_ERR_CANCELLED : ASB_ERR_GRPC_STATUS;
    asb__grpc_message(m, sizeof m, msg, mlen);
    asb__fail(err, r, "grpc %s: %s%s%s", call->method, asb__grpc_code_name(code), mlen ? ": " : "",
              m);
    if (err) snprintf(err->reason, sizeof err->reason, "%s", asb__grpc_code_name(code));
    return r;
}

static asb_result asb__grpc_finish(asb_grpc_call *call, asb__grpc_deframer *d, asb_error *err) {
    asb_h2_stream *s = call->s;
    asb_str st, msg, ct;
    int status;
    int have = asb_h2_stream_trailer(s, "grpc-status", &st);
    int trailers_only = !have && asb_h2_stream_header(s, "grpc-status", &st);
    status = asb_h2_stream_status(s);
    if (!have && !trailers_only) {
        if (status != 200) {
            static const int map[][2] = {{400, 13}, {401, 16}, {403, 7}, {404, 12},
                                         {429, 14}, {502, 14}, {503, 14}, {504, 14}};
            size_t i;
            int code = 2;
            for (i = 0; i < sizeof map / sizeof map[0]; i++)
                if (map[i][0] == status) code = map[i][1];
            asb__fail(err, ASB_ERR_HTTP_STATUS, "grpc %s: HTTP status %d without grpc-status (%s)",
                      call->method, status, asb__grpc_code_name(code));
            if (err) {
                err->http_status = status;
                snprintf(err->reason, sizeof err->reason, "%s", asb__grpc_code_name(code));
            }
            return ASB_ERR_HTTP_STATUS;
        }
        return asb__fail(err, ASB_ERR_HTTP_PROTOCOL, "grpc %s: the response ended without grpc-status",
                         call->method);
    }
    if (st.len == 0 || st.len > 3 || strspn(st.ptr, "0123456789") < st.len)
        return asb__fail(err, ASB_ERR_HTTP_PROTOCOL, "grpc %s: bad grpc-status", call->method);
    call->grpc_status = atoi(st.ptr);
    if (call->grpc_status != 0) {
        if (!(trailers_only ? asb_h2_stream_header(s, "grpc-message", &msg)
                            : asb_h2_stream_trailer(s, "grpc-message", &msg))) {
            msg.ptr = "";
            msg.len = 0;
        }
        return asb__grpc_status_result(call, call->grpc_status, msg.ptr, msg.len, err);
    }
    if (status != 200)
        return asb__fail(err, ASB_ERR_HTTP_PROTOCOL, "grpc %s: status OK with HTTP status %d",
                         call->method, status);
    if (!asb_h2_stream_header(s, "content-type", &ct) || ct.len < 16 ||
        memcmp(ct.ptr, "application/grpc", 16) != 0 || (ct.len > 16 && ct.ptr[16] != '+' &&
                                                        ct.ptr[16] != ';'))
        return asb__fail(err, ASB_ERR_HTTP_PROTOCOL, "grpc %s: content-type is not application/grpc",
                         call->method);
    if (d->in_msg || d->hdr_have)
        return asb__fail(err, ASB_ERR_HTTP_PROTOCOL, "grpc %s: the last message is truncated",
                         call->method);
    return ASB_OK;
}

ASB_API asb_result asb_grpc_call_run(asb_grpc_call *call, const asb_grpc_handlers *hd,
                                     asb_error *err) {
    asb__grpc_deframer d;
    asb__grpc_run x;
    asb_error local;
    asb_result r = ASB_OK;
    char *buf;
    if (!err) err = &local;
    memset(err, 0, sizeof *err);
    if (!call || call->ran) {
        r = asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "grpc: a call runs once");
        if (hd && hd->on_done) hd->on_done(hd->user_data, r, err);
        return r;
    }
    call->ran = 1;
    memset(&d, 0, sizeof d);
    d.max = call->max_msg;
    asb_buf_init(&d.msg, &call->alloc);
    x.h = hd;
    x.call = call;
    x.count = 0;
    buf = (char *)call->alloc.alloc_fn(65536, call->alloc.user_data);
    if (!buf) r = asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "grpc: out of memory");
    while (r == ASB_OK) {
        size_t n = 0;
        if (asb__grpc_cancelled(call)) {
            r = asb__fail(err, ASB_ERR_CANCELLED, "grpc %s: cancelled", call->method);
            break;
        }
        r = asb_h2_stream_read(call->s, buf, 65536, &n, err);
        if (r != ASB_OK) break;
        if (n == 0) {
            r = asb__grpc_finish(call, &d, err);
            break;
        }
        r = asb__grpc_feed(&d, buf, n, asb__grpc_deliver, &x);
        if (r == ASB_ERR_HTTP_PROTOCOL)
            asb__fail(err, r, "grpc %s: a compressed or malformed message (no encoding was offered)",
                      call->method);
        else if (r == ASB_ERR_TOO_LARGE)
            asb__fail(err, r, "grpc %s: a message of %lu bytes, above max_message_bytes %lu",
                      call->method, (unsigned long)d.need, (unsigned long)d.max);
        else if (r == ASB_ERR_CANCELLED)
            asb__fail(err, r, "grpc %s: cancelled", call->method);
        else if (r != ASB_OK)
            asb__fail(err, r, "grpc %s: out of memory", call->method);
    }
    if (r != ASB_OK) {
        /* a reset by the server is a gRPC status; ours and timeouts are
           reported as such; in every case the stream is cancelled */
        if (call->s->reset_by_peer && r == ASB_ERR_HTTP_PROTOCOL && call->s->failed) {
            int code = asb__grpc_from_rst(call->s->rst_code);
            r = asb__grpc_status_result(call, code, "stream reset by the server", 26, err);
        } else if (r == ASB_ERR_TIMEOUT) {
            snprintf(err->reason, sizeof err->reason, "DEADLINE_EXCEEDED");
        } else if (r == ASB_ERR_CANCELLED && !err->reason[0]) {
            snprintf(err->reason, sizeof err->reason, "CANCELLED");
        }
        asb_h2_stream_cancel(call->s);
    }
    if (buf) call->alloc.free_fn(buf, call->alloc.user_data);
    asb_buf_free(&d.msg);
    if (hd && hd->on_done) hd->on_done(hd->user_data, r, err);
    return r;
}

ASB_API void asb_grpc_call_cancel(asb_grpc_call *call) {
    if (!call) return;
    if (call->s->conn) pthread_mutex_lock(&call->s->conn->mu);
    call->cancel_requested = 1;
    if (call->s->conn) pthread_mutex_unlock(&call->s->conn->mu);
    asb_h2_stream_cancel(call->s);
}

ASB_API int asb_grpc_call_status(const asb_grpc_call *call) {
    return call ? call->grpc_status : -1;
}

ASB_API void asb_grpc_call_free(asb_grpc_call *call) {
    if (!call) return;
    asb_h2_stream_free(call->s);
    call->alloc.free_fn(call, call->alloc.user_data);
}

typedef struct asb__grpc_unary {
    asb_buf *resp;
    int count;
    asb_result oom;
} asb__grpc_unary;

static int asb__grpc_unary_msg(void *ud, const char *msg, size_t len) {
    asb__grpc_unary *u = (asb__grpc_unary *)ud;
    if (++u->count > 1) return 1;
    if (asb_buf_append(u->resp, msg, len) != ASB_OK) {
        u->oom = ASB_ERR_OUT_OF_MEMORY;
        return 1;
    }
    return 0;
}

ASB_API asb_result asb_grpc_unary(asb_h2_conn *conn, const asb_grpc_call_desc *desc,
                                  const void *req, size_t req_len, asb_buf *resp, asb_error *err) {
    asb_grpc_call *call;
    asb_grpc_handlers h;
    asb__grpc_unary u;
    asb_result r;
    if (!resp) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "grpc: NULL resp");
    r = asb_grpc_call_start(conn, desc, req, req_len, &call, err);
    if (r != ASB_OK) return r;
    memset(&u, 0, sizeof u);
    u.resp = resp;
    memset(&h, 0, sizeof h);
    h.on_message = asb__grpc_unary_msg;
    h.user_data = &u;
    r = asb_grpc_call_run(call, &h, err);
    asb_grpc_call_free(call);
    if (u.oom) return asb__fail(err, u.oom, "grpc: out of memory");
    if (u.count > 1)
        return asb__fail(err, ASB_ERR_HTTP_PROTOCOL, "grpc %s: a unary call answered with more "
                         "than one message", desc->method);
    if (r == ASB_OK && u.count == 0)
        return asb__fail(err, ASB_ERR_HTTP_PROTOCOL, "grpc %s: a unary call answered with no "
                         "message", desc->method);
    return r;
}

/* >>protobuf ================================================================
   The wire format: varints, length-delimited fields, fixed32/64 and
   skipped groups. The reader trusts no length. */

static asb_result asb__pb_varint_out(asb_buf *b, uint64_t v) {
    unsigned char tmp[10];
    size_t n = 0;
    while (v >= 0x80) {
        tmp[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    tmp[n++] = (unsigned char)v;
    return asb_buf_append(b, tmp, n);
}

static asb_result asb__pb_tag(asb_buf *b, uint32_t field, int wt) {
    if (!b || field == 0 || field > 0x1fffffffu) return ASB_ERR_INVALID_ARGUMENT;
    return asb__pb_varint_out(b, (uint64_t)field << 3 | (uint64_t)wt);
}

ASB_API asb_result asb_pb_put_varint(asb_buf *b, uint32_t field, uint64_t v) {
    asb_result r = asb__pb_tag(b, field, ASB_PB_VARINT);
    return r == ASB_OK ? asb__pb_varint_out(b, v) : r;
}

ASB_API asb_result asb_pb_put_int32(asb_buf *b, uint32_t field, int32_t v) {
    return asb_pb_put_varint(b, field, (uint64_t)(int64_t)v);
}

ASB_API asb_result asb_pb_put_bytes(asb_buf *b, uint32_t field, const void *p, size_t n) {
    asb_result r = asb__pb_tag(b, field, ASB_PB_LEN);
    if (r == ASB_OK && n && !p) r = ASB_ERR_INVALID_ARGUMENT;
    if (r == ASB_OK) r = asb__pb_varint_out(b, n);
    if (r == ASB_OK && n) r = asb_buf_append(b, p, n);
    return r;
}

ASB_API asb_result asb_pb_put_string(asb_buf *b, uint32_t field, const char *s) {
    if (!s) return ASB_ERR_INVALID_ARGUMENT;
    return asb_pb_put_bytes(b, field, s, strlen(s));
}

ASB_API asb_result asb_pb_begin(asb_buf *b, uint32_t field, size_t *mark) {
    asb_result r = asb__pb_tag(b, field, ASB_PB_LEN);
    if (r == ASB_OK && !mark) r = ASB_ERR_INVALID_ARGUMENT;
    if (r == ASB_OK) *mark = b->len;
    return r;
}

ASB_API asb_result asb_pb_end(asb_buf *b, size_t mark) {
    unsigned char tmp[10];
    size_t n = 0, len;
    uint64_t v;
    if (!b || mark > b->len) return ASB_ERR_INVALID_ARGUMENT;
    len = b->len - mark;
    v = len;
    while (v >= 0x80) {
        tmp[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    tmp[n++] = (unsigned char)v;
    if (asb_buf_reserve(b, n) != ASB_OK) return ASB_ERR_OUT_OF_MEMORY;
    memmove(b->ptr + mark + n, b->ptr + mark, len);
    memcpy(b->ptr + mark, tmp, n);
    b->len += n;
    b->ptr[b->len] = '\0';
    return ASB_OK;
}

ASB_API void asb_pb_reader_init(asb_pb_reader *r, const void *p, size_t n) {
    r->pos = (const unsigned char *)p;
    r->end = r->pos ? r->pos + n : r->pos;
}

static int asb__pb_varint_in(asb_pb_reader *r, uint64_t *out) {
    uint64_t v = 0;
    int shift = 0;
    for (;;) {
        unsigned char b;
        if (r->pos >= r->end) return -1;
        b = *r->pos++;
        if (shift == 63 && b > 1) return -1; /* more than 64 bits */
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) break;
        shift += 7;
        if (shift > 63) return -1;
    }
    *out = v;
    return 0;
}

static asb_result asb__pb_bad(asb_pb_reader *r, asb_error *err, const char *what) {
    r->pos = r->end = NULL; /* stays failed */
    return asb__fail(err, ASB_ERR_PROTOBUF_INVALID, "protobuf: %s", what);
}

/* One field's value (the tag already read). */
static int asb__pb_value(asb_pb_reader *r, int wt, asb_pb_field *f) {
    uint64_t n;
    switch (wt) {
    case ASB_PB_VARINT:
        return asb__pb_varint_in(r, &f->value);
    case ASB_PB_FIXED64:
    case ASB_PB_FIXED32: {
        size_t k = wt == ASB_PB_FIXED64 ? 8 : 4, i;
        if ((size_t)(r->end - r->pos) < k) return -1;
        f->value = 0;
        for (i = 0; i < k; i++) f->value |= (uint64_t)r->pos[i] << (8 * i);
        r->pos += k;
        return 0;
    }
    case ASB_PB_LEN:
        if (asb__pb_varint_in(r, &n) != 0 || n > (uint64_t)(r->end - r->pos)) return -1;
        f->bytes.ptr = (const char *)r->pos;
        f->bytes.len = (size_t)n;
        r->pos += n;
        return 0;
    default:
        return -1;
    }
}

ASB_API asb_result asb_pb_next(asb_pb_reader *r, asb_pb_field *f, asb_error *err) {
    uint64_t tag;
    if (!r || !f) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "protobuf: NULL argument");
    memset(f, 0, sizeof *f);
    if (!r->pos) return asb__fail(err, ASB_ERR_PROTOBUF_INVALID, "protobuf: reader failed before");
    if (r->pos >= r->end) return ASB_OK;
    if (asb__pb_varint_in(r, &tag) != 0 || tag > 0xffffffffu)
        return asb__pb_bad(r, err, "bad tag");
    f->number = (uint32_t)(tag >> 3);
    f->wire_type = (int)(tag & 7);
    if (f->number == 0) return asb__pb_bad(r, err, "field number 0");
    if (f->wire_type == ASB_PB_GROUP_END) return asb__pb_bad(r, err, "unmatched group end");
    if (f->wire_type == ASB_PB_GROUP_START) {
        /* skipped whole, nested groups matched by number */
        uint32_t stack[64];
        int depth = 0;
        stack[depth++] = f->number;
        while (depth > 0) {
            asb_pb_field g;
            uint32_t num;
            int wt;
            if (asb__pb_varint_in(r, &tag) != 0 || tag > 0xffffffffu)
                return asb__pb_bad(r, err, "bad tag in a group");
            num = (uint32_t)(tag >> 3);
            wt = (int)(tag & 7);
            if (num == 0) return asb__pb_bad(r, err, "field number 0");
            if (wt == ASB_PB_GROUP_START) {
                if (depth == 64) return asb__pb_bad(r, err, "groups nested too deep");
                stack[depth++] = num;
            } else if (wt == ASB_PB_GROUP_END) {
                if (stack[depth - 1] != num) return asb__pb_bad(r, err, "mismatched group end");
                depth--;
            } else if (asb__pb_value(r, wt, &g) != 0) {
                return asb__pb_bad(r, err, "bad field in a group");
            }
        }
        return ASB_OK;
    }
    if (asb__pb_value(r, f->wire_type, f) != 0)
        return asb__pb_bad(r, err, f->wire_type > 5 ? "wire type 6 or 7"
                                                    : "truncated field or bad varint");
    return ASB_OK;
}

ASB_API asb_result asb_pb_int32(const asb_pb_field *f, int32_t *out) {
    if (!f || !out || f->wire_type != ASB_PB_VARINT) return ASB_ERR_PROTOBUF_INVALID;
    *out = (int32_t)(uint32_t)(f->value & 0xffffffffu);
    return ASB_OK;
}

ASB_API asb_result asb_pb_uint32(const asb_pb_field *f, uint32_t *out) {
    if (!f || !out || f->wire_type != ASB_PB_VARINT) return ASB_ERR_PROTOBUF_INVALID;
    *out = (uint32_t)(f->value & 0xffffffffu);
    return ASB_OK;
}

ASB_API asb_result asb_pb_bytes(const asb_pb_field *f, asb_str *out) {
    if (!f || !out || f->wire_type != ASB_PB_LEN) return ASB_ERR_PROTOBUF_INVALID;
    *out = f->bytes;
    return ASB_OK;
}

/* -- process.v1: sandboxd's ProcessService messages --------------------------------
   Encoders and decoders for the messages of process.proto (agent-sandbox
   v0.5.6, packages/sandboxd/spec/process/v1), for the sandboxd runtime.
   Field numbers are the .proto's; a known field with the wrong wire type
   is ASB_ERR_PROTOBUF_INVALID, unknown fields are skipped, and in a oneof
   the last field wins, as protobuf says. */

#if defined(__GNUC__) || defined(__clang__)
#define ASB__MAYBE_UNUSED __attribute__((unused))
#else
#define ASB__MAYBE_UNUSED
#endif

typedef struct asb__pv1_config {
    const char *const *argv;     /* command, argc entries */
    size_t argc;
    const char *const *env_names; /* env_vars, env_count pairs */
    const char *const *env_values;
    size_t env_count;
    const char *cwd;             /* NULL: unset (an optional field) */
} asb__pv1_config;

/* ProcessConfig as field `field` of the enclosing message. */
static asb_result asb__pv1_put_config(asb_buf *b, uint32_t field, const asb__pv1_config *c) {
    size_t m, e, i;
    asb_result r = asb_pb_begin(b, field, &m);
    for (i = 0; r == ASB_OK && i < c->argc; i++) r = asb_pb_put_string(b, 1, c->argv[i]);
    for (i = 0; r == ASB_OK && i < c->env_count; i++) {
        /* map<string, string>: repeated entries {1: key, 2: value} */
        r = asb_pb_begin(b, 2, &e);
        if (r == ASB_OK) r = asb_pb_put_string(b, 1, c->env_names[i]);
        if (r == ASB_OK) r = asb_pb_put_string(b, 2, c->env_values[i]);
        if (r == ASB_OK) r = asb_pb_end(b, e);
    }
    if (r == ASB_OK && c->cwd) r = asb_pb_put_string(b, 3, c->cwd);
    if (r == ASB_OK) r = asb_pb_end(b, m);
    return r;
}

/* StartRequest{config, pty}: pty only when `pty` is 1 (then even 0x0). */
static ASB__MAYBE_UNUSED asb_result asb__pv1_start_request(asb_buf *b, const asb__pv1_config *c,
                                                           int pty, uint32_t cols, uint32_t rows) {
    asb_result r = asb__pv1_put_config(b, 1, c);
    if (r == ASB_OK && pty) {
        size_t m;
        r = asb_pb_begin(b, 2, &m);
        if (r == ASB_OK && cols) r = asb_pb_put_varint(b, 1, cols);
        if (r == ASB_OK && rows) r = asb_pb_put_varint(b, 2, rows);
        if (r == ASB_OK) r = asb_pb_end(b, m);
    }
    return r;
}

static ASB__MAYBE_UNUSED asb_result asb__pv1_execute_request(asb_buf *b, const asb__pv1_config *c) {
    return asb__pv1_put_config(b, 1, c);
}

/* WriteStdinRequest{process_id, oneof payload {input, eof: Empty}}. */
static ASB__MAYBE_UNUSED asb_result asb__pv1_write_stdin_request(asb_buf *b, int32_t pid,
                                                                 const void *data, size_t len,
                                                                 int eof) {
    asb_result r = pid ? asb_pb_put_int32(b, 1, pid) : ASB_OK;
    if (r != ASB_OK) return r;
    if (eof) return asb_pb_put_bytes(b, 3, NULL, 0);
    return asb_pb_put_bytes(b, 2, data, len); /* set even when empty: a oneof */
}

static ASB__MAYBE_UNUSED asb_result asb__pv1_send_signal_request(asb_buf *b, int32_t pid,
                                                                 int32_t sig) {
    asb_result r = pid ? asb_pb_put_int32(b, 1, pid) : ASB_OK;
    if (r == ASB_OK && sig) r = asb_pb_put_int32(b, 2, sig);
    return r;
}

static ASB__MAYBE_UNUSED asb_result asb__pv1_resize_tty_request(asb_buf *b, int32_t pid,
                                                                uint32_t cols, uint32_t rows) {
    asb_result r = pid ? asb_pb_put_int32(b, 1, pid) : ASB_OK;
    if (r == ASB_OK && cols) r = asb_pb_put_varint(b, 2, cols);
    if (r == ASB_OK && rows) r = asb_pb_put_varint(b, 3, rows);
    return r;
}

enum { ASB__PV1_NONE = 0, ASB__PV1_INIT, ASB__PV1_STDOUT, ASB__PV1_STDERR, ASB__PV1_EXIT };

/* One StartResponse: the event's kind, the process id or exit code, or
   the output bytes (borrowed from the message). */
typedef struct asb__pv1_event {
    int kind;
    int32_t value;
    asb_str data;
} asb__pv1_event;

static asb_result asb__pv1_bad(asb_error *err, const char *what) {
    return asb__fail(err, ASB_ERR_PROTOBUF_INVALID, "protobuf: %s", what);
}

/* The int32 field 1 of a nested InitEvent / ExitEvent. */
static asb_result asb__pv1_int32_of(const asb_pb_field *f, int32_t *out, asb_error *err) {
    asb_pb_reader r;
    asb_pb_field g;
    asb_result res;
    if (f->wire_type != ASB_PB_LEN) return asb__pv1_bad(err, "an event is not a message");
    *out = 0;
    asb_pb_reader_init(&r, f->bytes.ptr, f->bytes.len);
    while ((res = asb_pb_next(&r, &g, err)) == ASB_OK && g.number)
        if (g.number == 1 && asb_pb_int32(&g, out) != ASB_OK)
            return asb__pv1_bad(err, "an event's field 1 is not a varint");
    return res;
}

static ASB__MAYBE_UNUSED asb_result asb__pv1_start_response(const char *p, size_t n,
                                                            asb__pv1_event *ev, asb_error *err) {
    asb_pb_reader r;
    asb_pb_field f;
    asb_result res;
    memset(ev, 0, sizeof *ev);
    asb_pb_reader_init(&r, p, n);
    while ((res = asb_pb_next(&r, &f, err)) == ASB_OK && f.number) {
        if (f.number < 1 || f.number > 4) continue;
        memset(ev, 0, sizeof *ev); /* a oneof: the last one wins */
        if (f.number == 1 || f.number == 4) {
            res = asb__pv1_int32_of(&f, &ev->value, err);
            if (res != ASB_OK) return res;
            ev->kind = f.number == 1 ? ASB__PV1_INIT : ASB__PV1_EXIT;
        } else {
            if (asb_pb_bytes(&f, &ev->data) != ASB_OK)
                return asb__pv1_bad(err, "stdout or stderr is not bytes");
            ev->kind = f.number == 2 ? ASB__PV1_STDOUT : ASB__PV1_STDERR;
        }
    }
    return res;
}

typedef struct asb__pv1_exec_result {
    int32_t exit_code;
    asb_str out;
    asb_str errout;
} asb__pv1_exec_result;

static ASB__MAYBE_UNUSED asb_result asb__pv1_execute_response(const char *p, size_t n,
                                                              asb__pv1_exec_result *x,
                                                              asb_error *err) {
    asb_pb_reader r;
    asb_pb_field f;
    asb_result res;
    memset(x, 0, sizeof *x);
    asb_pb_reader_init(&r, p, n);
    while ((res = asb_pb_next(&r, &f, err)) == ASB_OK && f.number) {
        if (f.number == 1 && asb_pb_int32(&f, &x->exit_code) != ASB_OK)
            return asb__pv1_bad(err, "exit_code is not a varint");
        if ((f.number == 2 && asb_pb_bytes(&f, &x->out) != ASB_OK) ||
            (f.number == 3 && asb_pb_bytes(&f, &x->errout) != ASB_OK))
            return asb__pv1_bad(err, "stdout or stderr is not bytes");
    }
    return res;
}

/* >>kube ====================================================================
   Credentials (token, token file, basic auth, exec plugins, in-cluster),
   REST calls with Status decoding, and watches. */

extern char **environ; /* POSIX: the process environment */

/* The HTTP client of one client certificate. An exec plugin that returns
   certificates replaces it on every rotation while other threads may be
   inside asb_http_do on the old one (a watch, for minutes): each call
   holds a reference, the kube client holds one on the current client,
   and whoever drops the last frees it. Counted under the kube client's
   lock; freed outside it. */
typedef struct asb__kube_http {
    asb_http_client *http;
    int refs;
} asb__kube_http;

struct asb_kube_client {
    asb_allocator alloc;
    asb_kube_config cfg;
    int in_cluster;          /* cfg is the pod's service account */
    asb_http_client_desc http_desc;
    asb__kube_http *http;     /* current; replaced under lock */
    asb__kube_http *replaced; /* the one a rotation replaced, its reference
                                 still to drop (after the lock) */
    pthread_mutex_t lock;
    char *base;              /* server URL without a trailing '/' */
    asb_buf bearer;          /* current bearer token ("" for none) */
    char *basic;             /* base64 user:pass */
    /* token file: re-read when it changes */
    dev_t tf_dev;
    ino_t tf_ino;
    time_t tf_mtime;
    off_t tf_size;
    /* exec plugin */
    int exec_timeout_ms;
    int exec_have;           /* a credential is cached */
    int64_t exec_expiry;     /* epoch seconds, 0: none */
    unsigned exec_gen;       /* bumps on every plugin run */
    struct asb__informer *informers; /* one shared watch per resource and
                                        namespace (under lock) */
};

ASB_API const asb_kube_config *asb_kube_client_config(const asb_kube_client *kc) {
    return kc ? &kc->cfg : NULL;
}

static char *asb__kstrdup(asb__arena *a, const char *s) {
    size_t n = strlen(s);
    char *p = (char *)asb__arena_alloc(a, n + 1);
    if (p) memcpy(p, s, n + 1);
    return p;
}

/* In a pod with no kubeconfig, the pod's service account, without being
   asked (the reference loads the in-cluster config first): no file or
   list given, KUBECONFIG unset or empty, no ~/.kube/config, and the
   in-cluster variables and service-account token both there. Any
   kubeconfig at all wins, as it does for kubectl. */
static int asb__in_cluster_auto(const asb_kube_client_desc *d) {
    const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
    const char *list = getenv("KUBECONFIG"), *home = getenv("HOME");
    const char *sa = d->service_account_dir ? d->service_account_dir
                                            : "/var/run/secrets/kubernetes.io/serviceaccount";
    char path[4096];
    if (d->kubeconfig.path || d->kubeconfig.path_count || (list && *list)) return 0;
    if (!host || !*host || !port || !*port) return 0;
    if (home && *home) {
        snprintf(path, sizeof path, "%s/.kube/config", home);
        if (access(path, F_OK) == 0) return 0;
    }
    snprintf(path, sizeof path, "%s/token", sa);
    return access(path, R_OK) == 0;
}

ASB_API asb_result asb_kube_config_in_cluster(const char *sa_dir, const asb_allocator *alloc,
                                              asb_kube_config *out, asb_error *err) {
    const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
    const char *ns_env = getenv("POD_NAMESPACE");
    asb__arena *a;
    char path[4096], *text = NULL, *server;
    size_t len = 0;
    unsigned char ip[16];
    if (!out) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "in-cluster: NULL out");
    memset(out, 0, sizeof *out);
    if (!host || !*host || !port || !*port)
        return asb__fail(err, ASB_ERR_KUBECONFIG,
                         "not in a cluster: KUBERNETES_SERVICE_HOST and "
                         "KUBERNETES_SERVICE_PORT must both be set");
    if (!sa_dir) sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount";
    if (asb__allocator_resolve(alloc, &out->alloc_) != ASB_OK)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "allocator: give all three or none");
    a = asb__arena_new(&out->alloc_);
    if (!a) return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "in-cluster: out of memory");
    out->arena_ = a;
    server = (char *)asb__arena_alloc(a, strlen(host) + strlen(port) + 16);
    if (!server) goto oom;
    sprintf(server, asb__ip_literal(host, strlen(host), ip) == 6 ? "https://[%s]:%s"
                                                                : "https://%s:%s",
            host, port);
    out->server = server;
    out->context = "in-cluster";
    out->cluster = "in-cluster";
    out->user = "service-account";
    snprintf(path, sizeof path, "%s/token", sa_dir);
    out->token_file = asb__kstrdup(a, path);
    snprintf(path, sizeof path, "%s/ca.crt", sa_dir);
    if (asb__read_file(&out->alloc_, path, &text, &len, (size_t)4 << 20) != ASB_OK) {
        asb_kube_config_free(out);
        return asb__fail(err, ASB_ERR_KUBECONFIG, "in-cluster: cannot read %s: %s", path,
                         strerror(errno));
    }
    out->ca = (const char *)asb__arena_alloc(a, len + 1);
    if (!out->ca) {
        out->alloc_.free_fn(text, out->alloc_.user_data);
        goto oom;
    }
    memcpy((char *)out->ca, text, len + 1);
    out->ca_len = len;
    out->alloc_.free_fn(text, out->alloc_.user_data);
    if (ns_env && *ns_env) {
        out->default_namespace = asb__kstrdup(a, ns_env);
    } else {
        snprintf(path, sizeof path, "%s/namespace", sa_dir);
        if (asb__read_file(&out->alloc_, path, &text, &len, 4096) == ASB_OK) {
            while (len && (text[len - 1] == '\n' || text[len - 1] == ' ' || text[len - 1] == '\r'))
                text[--len] = '\0';
            out->default_namespace = len ? asb__kstrdup(a, text) : "default";
            out->alloc_.free_fn(text, out->alloc_.user_data);
        } else {
            out->default_namespace = "default";
        }
    }
    if (!out->token_file || !out->default_namespace) goto oom;
    return ASB_OK;
oom:
    asb_kube_config_free(out);
    return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "in-cluster: out of memory");
}

/* -- exec credential plugins ------------------------------------------------- */

/* The plugin's side of fork: async-signal-safe calls only (the program
   may have threads). Its stdin is /dev/null, stdout and stderr the pipes;
   nothing else of the program's reaches it (everything here is
   close-on-exec). Reports an errno on failfd if it cannot exec. */
static void asb__exec_child(const char *path, char *const *argv, char *const *envp, int outw,
                            int errw, int failfd) {
    struct sigaction sa;
    sigset_t none;
    int i, in, e;
    ssize_t wr;
    /* a handler of the program's must not run here: default for the
       caught signals (ignored ones stay ignored, as exec keeps them) */
    for (i = 1; i < 65; i++)
        if (sigaction(i, NULL, &sa) == 0 && sa.sa_handler != SIG_IGN &&
            sa.sa_handler != SIG_DFL) {
            memset(&sa, 0, sizeof sa);
            sa.sa_handler = SIG_DFL;
            sigemptyset(&sa.sa_mask);
            sigaction(i, &sa, NULL);
        }
    setpgid(0, 0); /* its own group: a timeout kills what it started too */
    /* copies above 2 first, so the dup2s cannot clobber one another when
       the program runs with 0, 1 or 2 closed (a pipe may then be one) */
    in = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (in >= 0) in = fcntl(in, F_DUPFD_CLOEXEC, 3);
    outw = fcntl(outw, F_DUPFD_CLOEXEC, 3);
    errw = fcntl(errw, F_DUPFD_CLOEXEC, 3);
    if (in >= 0 && outw >= 0 && errw >= 0 && dup2(in, 0) == 0 && dup2(outw, 1) == 1 &&
        dup2(errw, 2) == 2) {
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL); /* the plugin starts unmasked */
        execve(path, argv, envp);
    }
    e = errno;
    wr = write(failfd, &e, sizeof e);
    (void)wr;
    _exit(127);
}

/* Runs the plugin with an argv array (never a shell), its env added to
   ours plus KUBERNETES_EXEC_INFO; collects stdout and stderr (bounded);
   kills its process group at the timeout. */
static asb_result asb__exec_run(asb_kube_client *kc, asb_buf *out, asb_buf *errout,
                                int *status, asb_error *err) {
    const asb_kube_exec *ex = kc->cfg.exec;
    int po[2] = {-1, -1}, pe[2] = {-1, -1}, pf[2] = {-1, -1};
    pid_t pid;
    size_t n_env = 0, i, k;
    char **envp = NULL, **argv = NULL, *info = NULL, *envbuf = NULL;
    size_t env_len = 0;
    asb_buf ib;
    asb_json_writer w;
    int64_t deadline = asb__now_ms() + kc->exec_timeout_ms;
    asb_result r = ASB_OK;
    int child_errno = 0, open_fds;
    char path[4096];
    sigset_t all, saved;
    /* KUBERNETES_EXEC_INFO */
    asb_buf_init(&ib, &kc->alloc);
    asb_json_writer_init(&w, &ib);
    asb_json_object_begin(&w);
    asb_json_key(&w, "apiVersion");
    asb_json_string(&w, ex->api_version ? ex->api_version : "client.authentication.k8s.io/v1");
    asb_json_key(&w, "kind");
    asb_json_string(&w, "ExecCredential");
    asb_json_key(&w, "spec");
    asb_json_object_begin(&w);
    asb_json_key(&w, "interactive");
    asb_json_bool(&w, 0);
    if (ex->provide_cluster_info) {
        asb_json_key(&w, "cluster");
        asb_json_object_begin(&w);
        asb_json_key(&w, "server");
        asb_json_string(&w, kc->cfg.server);
        if (kc->cfg.tls_server_name) {
            asb_json_key(&w, "tls-server-name");
            asb_json_string(&w, kc->cfg.tls_server_name);
        }
        asb_json_key(&w, "insecure-skip-tls-verify");
        asb_json_bool(&w, kc->cfg.insecure_skip_tls_verify);
        if (kc->cfg.ca) {
            asb_buf b;
            asb_buf_init(&b, &kc->alloc);
            asb_base64_encode(kc->cfg.ca, kc->cfg.ca_len, &b);
            asb_json_key(&w, "certificate-authority-data");
            asb_json_string_n(&w, b.ptr ? b.ptr : "", b.len);
            asb_buf_free(&b);
        }
        asb_json_object_end(&w);
    }
    asb_json_object_end(&w);
    asb_json_object_end(&w);
    if (asb_json_writer_finish(&w) != ASB_OK) {
        asb_buf_free(&ib);
        return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "exec plugin: out of memory");
    }
    while (environ && environ[n_env]) n_env++;
    envp = (char **)kc->alloc.alloc_fn((n_env + ex->env_count + 2) * sizeof(char *),
                                       kc->alloc.user_data);
    argv = (char **)kc->alloc.alloc_fn((ex->arg_count + 2) * sizeof(char *), kc->alloc.user_data);
    info = (char *)kc->alloc.alloc_fn(ib.len + 32, kc->alloc.user_data);
    if (!envp || !argv || !info) {
        r = asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "exec plugin: out of memory");
        goto done;
    }
    sprintf(info, "KUBERNETES_EXEC_INFO=%s", ib.ptr);
    k = 0;
    for (i = 0; i < n_env; i++) {
        size_t j, nl;
        int overridden = strncmp(environ[i], "KUBERNETES_EXEC_INFO=", 21) == 0;
        for (j = 0; j < ex->env_count && !overridden; j++) {
            nl = strlen(ex->env_names[j]);
            if (strncmp(environ[i], ex->env_names[j], nl) == 0 && environ[i][nl] == '=')
                overridden = 1;
        }
        if (!overridden) envp[k++] = environ[i];
    }
    /* the plugin's own NAME=value strings, in one block freed after the
       run (they came from the kubeconfig's arena once, which then grew
       with every run: a plugin whose credential keeps expiring runs for
       as long as the program does) */
    for (i = 0; i < ex->env_count; i++)
        env_len += strlen(ex->env_names[i]) + strlen(ex->env_values[i]) + 2;
    if (env_len) {
        char *e;
        envbuf = (char *)kc->alloc.alloc_fn(env_len, kc->alloc.user_data);
        if (!envbuf) {
            r = asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "exec plugin: out of memory");
            goto done;
        }
        for (i = 0, e = envbuf; i < ex->env_count; i++) {
            envp[k++] = e;
            e += sprintf(e, "%s=%s", ex->env_names[i], ex->env_values[i]) + 1;
        }
    }
    envp[k++] = info;
    envp[k] = NULL;
    argv[0] = (char *)ex->command;
    for (i = 0; i < ex->arg_count; i++) argv[i + 1] = (char *)ex->args[i];
    argv[ex->arg_count + 1] = NULL;
    child_errno = asb__find_executable(ex->command, path, sizeof path);
    if (child_errno) goto cannot_run;
    if (asb__pipe_cloexec(po) < 0 || asb__pipe_cloexec(pe) < 0 || asb__pipe_cloexec(pf) < 0) {
        r = asb__fail(err, ASB_ERR_IO, "exec plugin: pipe: %s", strerror(errno));
        goto done;
    }
    /* every signal blocked across fork: the child must not run a handler
       of the program's (a copy of the program) before it execs */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    pid = fork();
    if (pid == 0) asb__exec_child(path, argv, envp, po[1], pe[1], pf[1]); /* no return */
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    if (pid < 0) {
        r = asb__fail(err, ASB_ERR_IO, "exec plugin: fork: %s", strerror(errno));
        goto done;
    }
    close(po[1]);
    close(pe[1]);
    close(pf[1]);
    po[1] = pe[1] = pf[1] = -1;
    {
        ssize_t got;
        while ((got = read(pf[0], &child_errno, sizeof child_errno)) < 0 && errno == EINTR) {}
        if (got != (ssize_t)sizeof child_errno) child_errno = 0; /* EOF: it runs */
    }
    open_fds = 2;
    while (open_fds > 0) {
        struct pollfd pfd[2];
        int64_t left = deadline - asb__now_ms();
        int pr;
        pfd[0].fd = po[0];
        pfd[1].fd = pe[0];
        pfd[0].events = pfd[1].events = POLLIN;
        pfd[0].revents = pfd[1].revents = 0;
        if (left <= 0) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            r = ASB_ERR_TIMEOUT;
            break;
        }
        pr = poll(pfd, 2, left > INT_MAX ? INT_MAX : (int)left);
        if (pr < 0 && errno == EINTR) continue;
        for (i = 0; i < 2; i++) {
            if (pfd[i].fd >= 0 && (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))) {
                char chunk[4096];
                ssize_t n = read(pfd[i].fd, chunk, sizeof chunk);
                asb_buf *dst = i == 0 ? out : errout;
                if (n <= 0) {
                    if (i == 0) {
                        close(po[0]);
                        po[0] = -1;
                    } else {
                        close(pe[0]);
                        pe[0] = -1;
                    }
                    open_fds--;
                } else {
                    if (dst->len < ((size_t)1 << 20)) asb_buf_append(dst, chunk, (size_t)n);
                    asb__wipe(chunk, (size_t)n); /* a credential, on the stack */
                }
            }
        }
    }
    {
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
        *status = st;
    }
    if (r == ASB_ERR_TIMEOUT) {
        r = asb__fail(err, ASB_ERR_CREDENTIALS,
                      "exec plugin \"%s\" did not finish within %d ms (killed)", ex->command,
                      kc->exec_timeout_ms);
        goto done;
    }
cannot_run:
    if (child_errno) {
        r = asb__fail(err, ASB_ERR_CREDENTIALS, "exec plugin \"%s\" cannot run: %s%s%s%s",
                      ex->command, strerror(child_errno),
                      strchr(ex->command, '/') ? "" : " (looked up in PATH only)",
                      ex->install_hint ? ". " : "", ex->install_hint ? ex->install_hint : "");
        goto done;
    }
done:
    if (po[0] >= 0) close(po[0]);
    if (pe[0] >= 0) close(pe[0]);
    if (pf[0] >= 0) close(pf[0]);
    if (po[1] >= 0) close(po[1]);
    if (pe[1] >= 0) close(pe[1]);
    if (pf[1] >= 0) close(pf[1]);
    if (envp) kc->alloc.free_fn(envp, kc->alloc.user_data);
    if (argv) kc->alloc.free_fn(argv, kc->alloc.user_data);
    if (info) kc->alloc.free_fn(info, kc->alloc.user_data);
    if (envbuf) {
        memset(envbuf, 0, env_len); /* an env value may be a secret */
        kc->alloc.free_fn(envbuf, kc->alloc.user_data);
    }
    asb_buf_free(&ib);
    return r;
}

/* Drops one reference; the last one frees the client. Without the lock. */
static void asb__kube_http_release(asb_kube_client *kc, asb__kube_http *h) {
    int last;
    if (!h) return;
    pthread_mutex_lock(&kc->lock);
    last = --h->refs == 0;
    pthread_mutex_unlock(&kc->lock);
    if (last) {
        asb_http_client_free(h->http);
        kc->alloc.free_fn(h, kc->alloc.user_data);
    }
}

/* A new current HTTP client (with the plugin's certificate, if any).
   Called with the lock (or before the client is shared); the reference
   of the one it replaces goes to kc->replaced, for the caller to drop
   once the lock is released. */
static asb_result asb__kube_make_http(asb_kube_client *kc, const char *cert, size_t cert_len,
                                      const char *key, size_t key_len, asb_error *err) {
    asb_http_client_desc d = kc->http_desc;
    asb__kube_http *h;
    asb_result r;
    asb_kube_config_tls(&kc->cfg, &d.tls);
    if (cert) {
        d.tls.client_cert_data = cert;
        d.tls.client_cert_data_len = cert_len;
        d.tls.client_key_data = key;
        d.tls.client_key_data_len = key_len;
    }
    if (kc->cfg.proxy_url) d.proxy_url = kc->cfg.proxy_url;
    d.retry.retry_429_any_method = 1; /* an API server's 429 ran no handler */
    d.allocator = &kc->alloc;
    h = (asb__kube_http *)kc->alloc.alloc_fn(sizeof *h, kc->alloc.user_data);
    if (!h) return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "kube: out of memory");
    r = asb_http_client_create(&d, &h->http, err);
    if (r != ASB_OK) {
        kc->alloc.free_fn(h, kc->alloc.user_data);
        return r;
    }
    h->http->hold_on_429 = 1; /* its 429s speak for the whole server */
    h->refs = 1; /* the kube client's */
    if (kc->http) {
        if (kc->replaced) {
            /* two rotations in one locked stretch: the older one's
               reference is dropped here (calls still on it keep it) */
            if (--kc->replaced->refs == 0) {
                asb_http_client_free(kc->replaced->http);
                kc->alloc.free_fn(kc->replaced, kc->alloc.user_data);
            }
        }
        kc->replaced = kc->http;
    }
    kc->http = h;
    return ASB_OK;
}

/* What a plugin's ExecCredential gave: a token, a certificate and key, or
   both; an expiry (0: none). Secrets: asb__exec_cred_free wipes them. */
typedef struct asb__exec_cred {
    int has_token, has_cert;
    asb_buf token, cert, key;
    int64_t expiry;
} asb__exec_cred;

static void asb__exec_cred_free(asb__exec_cred *c) {
    asb_buf_free(&c->token); /* both wiped (their wipe flag) */
    asb_buf_free(&c->cert);
    asb_buf_free(&c->key);
}

/* Decodes a plugin's stdout (untrusted: any program can print anything).
   `command` and `install_hint` only name it in messages; `want` is the
   apiVersion asked for. A token goes into an Authorization header, so
   control bytes in it (CR, LF, NUL) are refused here, with a clear
   error, rather than failing later as an invalid request header. */
static asb_result asb__exec_cred_decode(const char *text, size_t len, const char *command,
                                        const char *install_hint, const char *want,
                                        const asb_allocator *alloc, asb__exec_cred *c,
                                        asb_error *err) {
    asb_json_doc doc;
    asb_result r = ASB_OK;
    int av, st, cert, key, exp, tok;
    memset(c, 0, sizeof *c);
    asb_buf_init(&c->token, alloc);
    asb_buf_init(&c->cert, alloc);
    asb_buf_init(&c->key, alloc);
    c->token.wipe = c->key.wipe = 1;
    if (asb_json_doc_parse(&doc, text ? text : "", len, alloc, NULL) != ASB_OK)
        return asb__fail(err, ASB_ERR_CREDENTIALS,
                         "exec plugin \"%s\" printed something that is not an ExecCredential "
                         "(not JSON)%s%s",
                         command, install_hint ? ". " : "", install_hint ? install_hint : "");
    av = asb_json_find(&doc, 0, "apiVersion");
    st = asb_json_find(&doc, 0, "status");
    cert = asb_json_find(&doc, 0, "status.clientCertificateData");
    key = asb_json_find(&doc, 0, "status.clientKeyData");
    exp = asb_json_find(&doc, 0, "status.expirationTimestamp");
    tok = asb_json_find(&doc, 0, "status.token");
    if (!asb_json_string_eq(&doc, av, want, strlen(want))) {
        r = asb__fail(err, ASB_ERR_CREDENTIALS,
                      "exec plugin \"%s\": its ExecCredential apiVersion is not %s", command,
                      want);
    } else if (st < 0) {
        r = asb__fail(err, ASB_ERR_CREDENTIALS,
                      "exec plugin \"%s\": the ExecCredential has no status", command);
    } else if ((cert >= 0) != (key >= 0)) {
        r = asb__fail(err, ASB_ERR_CREDENTIALS,
                      "exec plugin \"%s\" returned only a certificate or only a key", command);
    } else if (tok < 0 && cert < 0) {
        r = asb__fail(err, ASB_ERR_CREDENTIALS,
                      "exec plugin \"%s\" returned neither a token nor a certificate", command);
    }
    if (r == ASB_OK && exp >= 0) {
        asb_buf ts;
        asb_buf_init(&ts, alloc);
        if (asb_json_append_string(&doc, exp, &ts) != ASB_OK ||
            asb_time_parse_rfc3339(ts.ptr ? ts.ptr : "", ts.len, &c->expiry, NULL) != ASB_OK)
            r = asb__fail(err, ASB_ERR_CREDENTIALS, "exec plugin \"%s\": bad expirationTimestamp",
                          command);
        asb_buf_free(&ts);
    }
    if (r == ASB_OK && tok >= 0) {
        size_t i;
        if (asb_json_append_string(&doc, tok, &c->token) != ASB_OK)
            r = asb__fail(err, ASB_ERR_CREDENTIALS, "exec plugin \"%s\": status.token is not a "
                          "string", command);
        for (i = 0; r == ASB_OK && i < c->token.len; i++)
            if ((unsigned char)c->token.ptr[i] < 0x20 || c->token.ptr[i] == 0x7f)
                r = asb__fail(err, ASB_ERR_CREDENTIALS, "exec plugin \"%s\": status.token holds "
                              "a control character", command);
        c->has_token = r == ASB_OK;
    }
    if (r == ASB_OK && cert >= 0) {
        if (asb_json_append_string(&doc, cert, &c->cert) != ASB_OK ||
            asb_json_append_string(&doc, key, &c->key) != ASB_OK)
            r = asb__fail(err, ASB_ERR_CREDENTIALS, "exec plugin \"%s\": clientCertificateData "
                          "and clientKeyData must be strings", command);
        c->has_cert = r == ASB_OK;
    }
    asb_json_doc_free(&doc);
    if (r != ASB_OK) asb__exec_cred_free(c);
    return r;
}

/* Runs the plugin and takes its ExecCredential. Called with the lock. */
static asb_result asb__exec_refresh(asb_kube_client *kc, asb_error *err) {
    const asb_kube_exec *ex = kc->cfg.exec;
    asb_buf out, eb;
    asb__exec_cred cred;
    int status = 0;
    asb_result r;
    char why[160];
    asb_buf_init(&out, &kc->alloc);
    asb_buf_init(&eb, &kc->alloc);
    out.wipe = 1; /* the ExecCredential: a token or a key */
    eb.wipe = 1;  /* a plugin may print what it got on stderr */
    kc->exec_gen++;
    {
        const char *base = strrchr(ex->command, '/');
        asb__log(&kc->http_desc.log, ASB_LOG_DEBUG, "kube.exec", "running credential plugin %s",
                 base ? base + 1 : ex->command); /* never its args or env */
    }
    r = asb__exec_run(kc, &out, &eb, &status, err);
    if (r != ASB_OK) goto done;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        asb__quote(why, sizeof why, eb.ptr ? eb.ptr : "", eb.len, 120);
        r = asb__fail(err, ASB_ERR_CREDENTIALS,
                      "exec plugin \"%s\" failed with %s %d: %s", ex->command,
                      WIFEXITED(status) ? "exit code" : "signal",
                      WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status), why);
        goto done;
    }
    r = asb__exec_cred_decode(out.ptr, out.len, ex->command, ex->install_hint,
                              ex->api_version ? ex->api_version
                                              : "client.authentication.k8s.io/v1",
                              &kc->alloc, &cred, err);
    if (r != ASB_OK) goto done;
    kc->exec_expiry = cred.expiry;
    if (cred.has_token) {
        kc->bearer.len = 0;
        r = asb_buf_append(&kc->bearer, cred.token.ptr, cred.token.len);
    }
    if (r == ASB_OK && cred.has_cert)
        r = asb__kube_make_http(kc, cred.cert.ptr, cred.cert.len, cred.key.ptr, cred.key.len,
                                err);
    if (r == ASB_OK) kc->exec_have = 1;
    asb__exec_cred_free(&cred);
done:
    asb_buf_free(&out); /* wiped: it held a credential */
    asb_buf_free(&eb);
    return r;
}

/* Makes sure a current credential is at hand; fills the Authorization
   header value into auth (empty: none) and hands out a reference on the
   HTTP client that goes with it (its client certificate), taken in the
   same locked stretch so the two match. Release it after the call. */
static asb_result asb__kube_auth(asb_kube_client *kc, asb_buf *auth, unsigned *gen,
                                 asb__kube_http **http, asb_error *err) {
    asb_result r = ASB_OK;
    asb__kube_http *replaced;
    *http = NULL;
    pthread_mutex_lock(&kc->lock);
    if (kc->cfg.token_file && !kc->cfg.token) {
        struct stat st;
        if (stat(kc->cfg.token_file, &st) != 0) {
            r = asb__fail(err, ASB_ERR_CREDENTIALS, "token file %s: %s", kc->cfg.token_file,
                          strerror(errno));
        } else if (st.st_dev != kc->tf_dev || st.st_ino != kc->tf_ino ||
                   st.st_mtime != kc->tf_mtime || st.st_size != kc->tf_size) {
            char *text = NULL;
            size_t len = 0;
            if (asb__read_file(&kc->alloc, kc->cfg.token_file, &text, &len, 1 << 20) != ASB_OK) {
                r = asb__fail(err, ASB_ERR_CREDENTIALS, "token file %s: cannot read it",
                              kc->cfg.token_file);
            } else {
                while (len && (text[len - 1] == '\n' || text[len - 1] == '\r' ||
                               text[len - 1] == ' '))
                    len--;
                kc->bearer.len = 0;
                r = asb_buf_append(&kc->bearer, text, len);
                asb__free_secret(&kc->alloc, text, len);
                kc->tf_dev = st.st_dev;
                kc->tf_ino = st.st_ino;
                kc->tf_mtime = st.st_mtime;
                kc->tf_size = st.st_size;
            }
        }
    } else if (kc->cfg.exec && !kc->cfg.token && !kc->cfg.client_cert && !kc->basic) {
        /* a static credential wins over the plugin, as in client-go */
        if (!kc->exec_have ||
            (kc->exec_expiry && (int64_t)time(NULL) >= kc->exec_expiry - 10))
            r = asb__exec_refresh(kc, err);
    }
    *gen = kc->exec_gen;
    auth->len = 0;
    if (r == ASB_OK) {
        if (kc->bearer.len) {
            r = asb_buf_append(auth, "Bearer ", 7);
            if (r == ASB_OK) r = asb_buf_append(auth, kc->bearer.ptr, kc->bearer.len);
        } else if (kc->basic) {
            r = asb_buf_append(auth, "Basic ", 6);
            if (r == ASB_OK) r = asb_buf_append(auth, kc->basic, strlen(kc->basic));
        }
    }
    if (r == ASB_OK) {
        *http = kc->http;
        kc->http->refs++;
    }
    replaced = kc->replaced;
    kc->replaced = NULL;
    pthread_mutex_unlock(&kc->lock);
    asb__kube_http_release(kc, replaced); /* freed now unless a call is on it */
    return r;
}

ASB_API asb_result asb_kube_client_create(const asb_kube_client_desc *desc,
                                          asb_kube_client **out, asb_error *err) {
    asb_kube_client_desc zero;
    asb_kube_client *kc;
    asb_allocator a;
    asb_result r;
    size_t n;
    if (!out) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "kube: NULL out");
    *out = NULL;
    if (!desc) {
        memset(&zero, 0, sizeof zero);
        desc = &zero;
    }
    if (asb__allocator_resolve(desc->http.allocator ? desc->http.allocator
                                                    : desc->kubeconfig.allocator,
                               &a) != ASB_OK)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "allocator: give all three or none");
    kc = (asb_kube_client *)a.alloc_fn(sizeof *kc, a.user_data);
    if (!kc) return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "kube: out of memory");
    memset(kc, 0, sizeof *kc);
    kc->alloc = a;
    pthread_mutex_init(&kc->lock, NULL);
    asb_buf_init(&kc->bearer, &a);
    kc->bearer.wipe = 1;
    kc->http_desc = desc->http;
    kc->exec_timeout_ms = desc->exec_timeout_ms > 0 ? desc->exec_timeout_ms : 30000;
    kc->in_cluster = desc->in_cluster || asb__in_cluster_auto(desc);
    if (kc->in_cluster) {
        r = asb_kube_config_in_cluster(desc->service_account_dir, &a, &kc->cfg, err);
    } else {
        asb_kubeconfig_desc kd = desc->kubeconfig;
        kd.allocator = &a;
        r = asb_kubeconfig_load(&kd, &kc->cfg, err);
    }
    if (r != ASB_OK) {
        asb_kube_client_free(kc);
        return r;
    }
    if (kc->cfg.auth_provider && !kc->cfg.token && !kc->cfg.exec) {
        r = asb__fail(err, ASB_ERR_CREDENTIALS,
                      "kubeconfig user \"%s\" uses the auth-provider \"%s\", which is not "
                      "supported (client-go removed most of them): use an exec credential "
                      "plugin such as kubelogin",
                      kc->cfg.user ? kc->cfg.user : "", kc->cfg.auth_provider);
        asb_kube_client_free(kc);
        return r;
    }
    if (kc->cfg.username && kc->cfg.password) {
        asb_buf up, b;
        asb_buf_init(&up, &a);
        asb_buf_init(&b, &a);
        up.wipe = b.wipe = 1;
        asb_buf_append(&up, kc->cfg.username, strlen(kc->cfg.username));
        asb_buf_append(&up, ":", 1);
        asb_buf_append(&up, kc->cfg.password, strlen(kc->cfg.password));
        asb_base64_encode(up.ptr, up.len, &b);
        asb_buf_free(&up);
        kc->basic = b.ptr;
    }
    if (kc->cfg.token) asb_buf_append(&kc->bearer, kc->cfg.token, strlen(kc->cfg.token));
    n = strlen(kc->cfg.server);
    while (n && kc->cfg.server[n - 1] == '/') n--;
    kc->base = (char *)a.alloc_fn(n + 1, a.user_data);
    if (!kc->base) {
        asb_kube_client_free(kc);
        return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "kube: out of memory");
    }
    memcpy(kc->base, kc->cfg.server, n);
    kc->base[n] = '\0';
    r = asb__kube_make_http(kc, NULL, 0, NULL, 0, err);
    if (r != ASB_OK) {
        asb_kube_client_free(kc);
        return r;
    }
    *out = kc;
    return ASB_OK;
}

static void asb__informers_free(asb_kube_client *kc);

ASB_API void asb_kube_client_free(asb_kube_client *kc) {
    if (!kc) return;
    /* no call is running (the caller's promise): these are the last */
    asb__informers_free(kc);
    asb__kube_http_release(kc, kc->replaced);
    asb__kube_http_release(kc, kc->http);
    asb_kube_config_free(&kc->cfg);
    asb_buf_free(&kc->bearer); /* wiped */
    if (kc->basic) asb__free_secret(&kc->alloc, kc->basic, strlen(kc->basic));
    if (kc->base) kc->alloc.free_fn(kc->base, kc->alloc.user_data);
    pthread_mutex_destroy(&kc->lock);
    kc->alloc.free_fn(kc, kc->alloc.user_data);
}

/* Text a server chose, on its way into an error message or a log: a
   control byte (a newline forging a log line, an escape sequence for the
   terminal) becomes '?'; the rest, UTF-8 included, stays readable. */
static void asb__scrub_controls(char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

/* Turns a failure response into asb_error: the Status's reason and
   message when the body is one, else the status and body excerpt. */
static asb_result asb__kube_status_error(const char *method, const char *path, int status,
                                         const asb_buf *body, asb_error *err) {
    asb_result code = status == 404 ? ASB_ERR_NOT_FOUND : ASB_ERR_KUBE_API;
    asb_json_doc doc;
    char reason[ASB_ERROR_REASON_SIZE] = "", msg[300] = "", pq[200];
    const char *q = strchr(path, '?');
    asb__quote(pq, sizeof pq, path, q ? (size_t)(q - path) : strlen(path), 180);
    if (body->len && asb_json_doc_parse(&doc, body->ptr, body->len, NULL, NULL) == ASB_OK) {
        if (asb_json_string_eq(&doc, asb_json_find(&doc, 0, "kind"), "Status", 6)) {
            asb_json_get_string(&doc, asb_json_find(&doc, 0, "reason"), reason, sizeof reason,
                                NULL);
            asb_json_get_string(&doc, asb_json_find(&doc, 0, "message"), msg, sizeof msg, NULL);
            asb__scrub_controls(reason);
            asb__scrub_controls(msg);
        }
        asb_json_doc_free(&doc);
    }
    if (!err) return code;
    if (msg[0])
        asb__fail(err, code, "%s %s: %d %s: %s", method, pq, status, reason, msg);
    else
        asb__fail(err, code, "%s %s: HTTP %d", method, pq, status);
    err->http_status = status;
    memcpy(err->reason, reason, sizeof err->reason);
    err->body_len = body->len < sizeof err->body ? body->len : sizeof err->body;
    if (err->body_len) memcpy(err->body, body->ptr, err->body_len);
    return code;
}

/* The core of every call: credentials, one HTTP exchange, one retry after
   a 401 when a plugin can mint a new credential. */
static asb_result asb__kube_do(asb_kube_client *kc, asb_http_request *req, const char *method,
                               const char *path, asb_http_response *resp, asb_error *err) {
    asb_buf url, auth;
    asb_http_header h[3];
    const asb_http_header *ct = req->headers && req->header_count ? &req->headers[0] : NULL;
    int attempt;
    asb_result r = ASB_OK;
    if (!kc || !path || path[0] != '/')
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "kube: a path must start with '/'");
    memset(resp, 0, sizeof *resp);
    asb_buf_init(&url, &kc->alloc);
    asb_buf_init(&auth, &kc->alloc);
    auth.wipe = 1;
    if (asb_buf_append(&url, kc->base, strlen(kc->base)) != ASB_OK ||
        asb_buf_append(&url, path, strlen(path)) != ASB_OK) {
        asb_buf_free(&url);
        return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "kube: out of memory");
    }
    for (attempt = 0; attempt < 2; attempt++) {
        unsigned gen = 0;
        asb__kube_http *http = NULL;
        size_t k = 0;
        r = asb__kube_auth(kc, &auth, &gen, &http, err);
        if (r != ASB_OK) break;
        h[k].name = "Accept";
        h[k++].value = "application/json";
        /* the caller's Content-Type, from its own array: req->headers is
           ours (h) after the first attempt */
        if (ct) h[k++] = *ct;
        if (auth.len) {
            h[k].name = "Authorization";
            h[k++].value = auth.ptr;
        }
        req->headers = h;
        req->header_count = k;
        req->method = method;
        req->url = url.ptr;
        asb_http_response_free(resp);
        r = asb_http_do(http->http, req, resp, err);
        asb__kube_http_release(kc, http);
        if (resp->status == 401 && kc->cfg.exec && attempt == 0 && !req->on_body) {
            /* the plugin's credential was refused: mint a new one, once
               per credential generation, and try again */
            pthread_mutex_lock(&kc->lock);
            if (kc->exec_gen == gen) kc->exec_have = 0;
            pthread_mutex_unlock(&kc->lock);
            asb__log(&kc->http_desc.log, ASB_LOG_INFO, "kube.credentials.refresh",
                     "%s %.*s: 401, running the credential plugin again", method,
                     (int)strcspn(path, "?"), path); /* no query: it may carry tokens */
            continue;
        }
        break;
    }
    if (r == ASB_ERR_HTTP_STATUS && resp->status >= 400) {
        r = asb__kube_status_error(method, path, resp->status, &resp->body, err);
        asb__error_headers(err, resp);
    }
    if (r != ASB_OK && auth.len) {
        /* a Status (or any body) echoing our headers: mask the credential
           after "Bearer " or "Basic ", as the router path does */
        const char *sp = (const char *)memchr(auth.ptr, ' ', auth.len);
        if (sp) asb__mask_error(err, sp + 1);
    }
    asb_buf_free(&auth); /* wiped */
    asb_buf_free(&url);
    return r;
}

ASB_API asb_result asb_kube_request(asb_kube_client *kc, const char *method, const char *path,
                                    const char *content_type, const char *body, size_t body_len,
                                    asb_buf *out, asb_error *err) {
    asb_http_request req;
    asb_http_response resp;
    asb_http_header ct;
    asb_result r;
    memset(&req, 0, sizeof req);
    if (body) {
        ct.name = "Content-Type";
        ct.value = content_type ? content_type : "application/json";
        req.headers = &ct;
        req.header_count = 1;
        req.body = body;
        req.body_len = body_len;
    }
    r = asb__kube_do(kc, &req, method ? method : "GET", path, &resp, err);
    if (r == ASB_OK && out && resp.body.len) r = asb_buf_append(out, resp.body.ptr, resp.body.len);
    asb_http_response_free(&resp);
    return r;
}

/* "/apis/<g>/<v>" or "/api/v1", then "/namespaces/<ns>/<plural>[/<name>]". */
static asb_result asb__kube_path(const asb_kube_resource *res, const char *ns, const char *name,
                                 asb_buf *p, asb_error *err) {
    asb_result r;
    if (!res || !res->version || !res->plural)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "kube: incomplete resource");
    if (ns && asb_dns_label_validate(ns, strlen(ns), err) != ASB_OK) return ASB_ERR_INVALID_ARGUMENT;
    if (name) {
        size_t i, n = strlen(name);
        /* object names are DNS subdomains: lowercase, digits, '-', '.' */
        if (n == 0 || n > 253) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "kube: bad name");
        for (i = 0; i < n; i++)
            if (!asb__is_lower_alnum((unsigned char)name[i]) && name[i] != '-' && name[i] != '.')
                return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                                 "kube: object name may hold only lowercase letters, digits, "
                                 "'-' and '.'");
        /* "." and ".." would name the collection or its parent once in the
           path (DELETE .../sandboxclaims/..): refused, as client-go's
           IsValidPathSegmentName does ('/' and '%' cannot pass above) */
        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                             "kube: object name may not be \".\" or \"..\"");
    }
    if (res->group && *res->group) {
        r = asb_buf_append(p, "/apis/", 6);
        if (r == ASB_OK) r = asb_buf_append(p, res->group, strlen(res->group));
        if (r == ASB_OK) r = asb_buf_append(p, "/", 1);
    } else {
        r = asb_buf_append(p, "/api/", 5);
    }
    if (r == ASB_OK) r = asb_buf_append(p, res->version, strlen(res->version));
    if (r == ASB_OK && ns) {
        r = asb_buf_append(p, "/namespaces/", 12);
        if (r == ASB_OK) r = asb_buf_append(p, ns, strlen(ns));
    }
    if (r == ASB_OK) r = asb_buf_append(p, "/", 1);
    if (r == ASB_OK) r = asb_buf_append(p, res->plural, strlen(res->plural));
    if (r == ASB_OK && name) {
        r = asb_buf_append(p, "/", 1);
        if (r == ASB_OK) r = asb_buf_append(p, name, strlen(name));
    }
    if (r != ASB_OK) return asb__fail(err, r, "kube: out of memory");
    return ASB_OK;
}

static asb_result asb__kube_query(asb_buf *p, int *first, const char *key, const char *value) {
    asb_result r = asb_buf_append(p, *first ? "?" : "&", 1);
    *first = 0;
    if (r == ASB_OK) r = asb_buf_append(p, key, strlen(key));
    if (r == ASB_OK) r = asb_buf_append(p, "=", 1);
    if (r == ASB_OK) r = asb_percent_encode_segment(value, strlen(value), p);
    return r;
}

#define ASB__KUBE_CALL(method, ns, name, ctype, body, len, out)                  \
    do {                                                                         \
        asb_buf path_;                                                           \
        asb_result r_;                                                           \
        asb_buf_init(&path_, NULL);                                              \
        r_ = asb__kube_path(res, (ns), (name), &path_, err);                     \
        if (r_ == ASB_OK)                                                        \
            r_ = asb_kube_request(kc, (method), path_.ptr, (ctype), (body), (len), \
                                  (out), err);                                   \
        asb_buf_free(&path_);                                                    \
        return r_;                                                               \
    } while (0)

ASB_API asb_result asb_kube_create(asb_kube_client *kc, const asb_kube_resource *res,
                                   const char *ns, const char *json, size_t len, asb_buf *out,
                                   asb_error *err) {
    ASB__KUBE_CALL("POST", ns, NULL, NULL, json ? json : "", json ? len : 0, out);
}

ASB_API asb_result asb_kube_get(asb_kube_client *kc, const asb_kube_resource *res,
                                const char *ns, const char *name, asb_buf *out, asb_error *err) {
    if (!name) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "kube: get needs a name");
    ASB__KUBE_CALL("GET", ns, name, NULL, NULL, 0, out);
}

ASB_API asb_result asb_kube_delete(asb_kube_client *kc, const asb_kube_resource *res,
                                   const char *ns, const char *name, asb_error *err) {
    if (!name) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "kube: delete needs a name");
    ASB__KUBE_CALL("DELETE", ns, name, NULL, NULL, 0, NULL);
}

ASB_API asb_result asb_kube_delete_uid(asb_kube_client *kc, const asb_kube_resource *res,
                                       const char *ns, const char *name, const char *uid,
                                       asb_error *err) {
    asb_buf body;
    asb_json_writer w;
    asb_result r;
    if (!uid || !*uid) return asb_kube_delete(kc, res, ns, name, err);
    if (!name) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "kube: delete needs a name");
    asb_buf_init(&body, NULL);
    asb_json_writer_init(&w, &body);
    asb_json_object_begin(&w);
    asb_json_key(&w, "apiVersion");
    asb_json_string(&w, "v1");
    asb_json_key(&w, "kind");
    asb_json_string(&w, "DeleteOptions");
    asb_json_key(&w, "preconditions");
    asb_json_object_begin(&w);
    asb_json_key(&w, "uid");
    asb_json_string(&w, uid);
    asb_json_object_end(&w);
    asb_json_object_end(&w);
    r = asb_json_writer_finish(&w);
    if (r != ASB_OK) {
        asb_buf_free(&body);
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "kube: bad uid");
    }
    {
        asb_buf path;
        asb_buf_init(&path, NULL);
        r = asb__kube_path(res, ns, name, &path, err);
        if (r == ASB_OK)
            r = asb_kube_request(kc, "DELETE", path.ptr, NULL, body.ptr, body.len, NULL, err);
        asb_buf_free(&path);
    }
    asb_buf_free(&body);
    return r;
}

ASB_API asb_result asb_kube_patch(asb_kube_client *kc, const asb_kube_resource *res,
                                  const char *ns, const char *name, const char *json, size_t len,
                                  asb_buf *out, asb_error *err) {
    if (!name || !json) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "kube: patch needs a name and a body");
    ASB__KUBE_CALL("PATCH", ns, name, "application/merge-patch+json", json, len, out);
}

ASB_API asb_result asb_kube_list(asb_kube_client *kc, const asb_kube_resource *res,
                                 const char *ns, const asb_kube_list_opts *opts, asb_buf *out,
                                 asb_error *err) {
    asb_buf path;
    asb_result r;
    int first = 1;
    char num[24];
    asb_buf_init(&path, NULL);
    r = asb__kube_path(res, ns, NULL, &path, err);
    if (r == ASB_OK && opts) {
        if (opts->label_selector) r = asb__kube_query(&path, &first, "labelSelector", opts->label_selector);
        if (r == ASB_OK && opts->field_selector)
            r = asb__kube_query(&path, &first, "fieldSelector", opts->field_selector);
        if (r == ASB_OK && opts->limit > 0) {
            snprintf(num, sizeof num, "%d", opts->limit);
            r = asb__kube_query(&path, &first, "limit", num);
        }
        if (r == ASB_OK && opts->continue_token && *opts->continue_token)
            r = asb__kube_query(&path, &first, "continue", opts->continue_token);
        if (r != ASB_OK && r != ASB_ERR_INVALID_ARGUMENT) r = asb__fail(err, r, "kube: out of memory");
    }
    if (r == ASB_OK) r = asb_kube_request(kc, "GET", path.ptr, NULL, NULL, 0, out, err);
    asb_buf_free(&path);
    return r;
}

/* -- watch --------------------------------------------------------------------- */

/* Splits a byte stream into lines, keeping the partial last line across
   chunks; a line over the cap is an error, not a truncated event. */
typedef struct asb__lines {
    asb_buf line;
    size_t max;
    int (*emit)(void *ctx, const char *line, size_t len);
    void *ctx;
    int stopped; /* emit asked to stop (its result kept in result) */
    int result;
} asb__lines;

static asb_result asb__lines_push(asb__lines *ls, const char *p, size_t n) {
    while (n > 0 && !ls->stopped) {
        const char *nl = (const char *)memchr(p, '\n', n);
        size_t take = nl ? (size_t)(nl - p) : n;
        if (ls->line.len + take > ls->max) return ASB_ERR_TOO_LARGE;
        if (take && asb_buf_append(&ls->line, p, take) != ASB_OK) return ASB_ERR_OUT_OF_MEMORY;
        if (!nl) break;
        {
            size_t len = ls->line.len;
            while (len && ls->line.ptr[len - 1] == '\r') len--;
            if (len) {
                int rc = ls->emit(ls->ctx, ls->line.ptr, len);
                if (rc != 0) {
                    ls->stopped = 1;
                    ls->result = rc;
                }
            }
            ls->line.len = 0;
        }
        p += take + 1;
        n -= take + 1;
    }
    return ASB_OK;
}

typedef struct asb__watch_ctx {
    asb__lines lines;
    asb_watch_fn fn;
    void *user;
    asb_buf rv;        /* last resourceVersion seen */
    int gone;          /* an ERROR event said 410 */
    int bookmarks;     /* opts->bookmarks_to_callback */
    int events;
    asb_result fail;
    asb_allocator alloc;
} asb__watch_ctx;

static int asb__watch_line(void *ctx, const char *line, size_t len) {
    asb__watch_ctx *w = (asb__watch_ctx *)ctx;
    asb_json_doc doc;
    asb_watch_event ev;
    int type, obj, rvt, rc = 0;
    char rvbuf[128] = "";
    if (asb_json_doc_parse(&doc, line, len, &w->alloc, NULL) != ASB_OK) {
        w->fail = ASB_ERR_JSON_INVALID;
        return -1;
    }
    type = asb_json_find(&doc, 0, "type");
    obj = asb_json_find(&doc, 0, "object");
    memset(&ev, 0, sizeof ev);
    if (asb_json_string_eq(&doc, type, "ADDED", 5)) ev.type = ASB_WATCH_ADDED;
    else if (asb_json_string_eq(&doc, type, "MODIFIED", 8)) ev.type = ASB_WATCH_MODIFIED;
    else if (asb_json_string_eq(&doc, type, "DELETED", 7)) ev.type = ASB_WATCH_DELETED;
    else if (asb_json_string_eq(&doc, type, "BOOKMARK", 8)) ev.type = ASB_WATCH_BOOKMARK;
    else if (asb_json_string_eq(&doc, type, "ERROR", 5)) ev.type = ASB_WATCH_ERROR;
    if (!ev.type || obj < 0) {
        asb_json_doc_free(&doc);
        w->fail = ASB_ERR_JSON_INVALID;
        return -1;
    }
    rvt = asb_json_find(&doc, obj, "metadata.resourceVersion");
    asb_json_get_string(&doc, rvt, rvbuf, sizeof rvbuf, NULL);
    if (ev.type == ASB_WATCH_ERROR) {
        int64_t code = 0;
        asb_json_get_int64(&doc, asb_json_find(&doc, obj, "code"), &code);
        if (code == 410) {
            /* too old: restart from "0", and do not bother the caller */
            w->gone = 1;
            asb_json_doc_free(&doc);
            return 2;
        }
    } else if (rvbuf[0]) {
        w->rv.len = 0;
        asb_buf_append(&w->rv, rvbuf, strlen(rvbuf));
    }
    ev.doc = &doc;
    ev.object = obj;
    ev.resource_version = rvbuf;
    w->events++;
    if (ev.type != ASB_WATCH_BOOKMARK || w->bookmarks) rc = w->fn(w->user, &ev);
    asb_json_doc_free(&doc);
    if (rc < 0) w->fail = (asb_result)rc;
    return rc;
}

static asb_result asb__watch_body(void *ctx, const char *p, size_t n) {
    asb__watch_ctx *w = (asb__watch_ctx *)ctx;
    asb_result r = asb__lines_push(&w->lines, p, n);
    if (r != ASB_OK) {
        w->fail = r;
        return r;
    }
    return w->lines.stopped ? ASB_ERR_CANCELLED : ASB_OK;
}

ASB_API asb_result asb_kube_watch(asb_kube_client *kc, const asb_kube_resource *res,
                                  const char *ns, const asb_watch_opts *opts, asb_watch_fn fn,
                                  void *user_data, asb_error *err) {
    asb_watch_opts zero;
    asb__watch_ctx w;
    asb_buf base;
    asb_result r = ASB_OK;
    int64_t deadline;
    int backoff = 100, refusals = 0;
    int quick_backoff = 100; /* before a restart after 410 or a very short watch */
    char last[64] = ""; /* why the last attempt failed, for the timeout */
    if (!kc || !fn) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "watch: NULL argument");
    if (!opts) {
        memset(&zero, 0, sizeof zero);
        opts = &zero;
    }
    memset(&w, 0, sizeof w);
    w.fn = fn;
    w.user = user_data;
    w.alloc = kc->alloc;
    asb_buf_init(&w.rv, &kc->alloc);
    asb_buf_init(&w.lines.line, &kc->alloc);
    w.lines.max = opts->max_event_bytes ? opts->max_event_bytes : (size_t)16 << 20;
    w.lines.emit = asb__watch_line;
    w.lines.ctx = &w;
    w.bookmarks = opts->bookmarks_to_callback;
    if (opts->resource_version) asb_buf_append(&w.rv, opts->resource_version, strlen(opts->resource_version));
    deadline = opts->deadline_ms > 0 ? asb__now_ms() + opts->deadline_ms : 0;
    asb_buf_init(&base, &kc->alloc);
    r = asb__kube_path(res, ns, NULL, &base, err);
    while (r == ASB_OK) {
        asb_buf path;
        asb_http_request req;
        asb_http_response resp;
        int first = 1, status, refused = 0, pause, events0 = w.events,
            tsec = opts->timeout_seconds > 0 ? opts->timeout_seconds : 60;
        int64_t started;
        int64_t retry_after;
        char num[24];
        asb_retry_policy once;
        if (deadline) {
            int64_t left = deadline - asb__now_ms();
            if (left <= 0) {
                r = asb__fail(err, ASB_ERR_TIMEOUT, "watch: deadline reached");
                break;
            }
            if (left / 1000 + 1 < tsec) tsec = (int)(left / 1000) + 1;
        }
        asb_buf_init(&path, &kc->alloc);
        asb_buf_append(&path, base.ptr, base.len);
        asb__kube_query(&path, &first, "watch", "true");
        asb__kube_query(&path, &first, "allowWatchBookmarks", "true");
        snprintf(num, sizeof num, "%d", tsec);
        asb__kube_query(&path, &first, "timeoutSeconds", num);
        if (w.rv.len) asb__kube_query(&path, &first, "resourceVersion", w.rv.ptr);
        if (opts->label_selector) asb__kube_query(&path, &first, "labelSelector", opts->label_selector);
        if (opts->field_selector) asb__kube_query(&path, &first, "fieldSelector", opts->field_selector);
        memset(&req, 0, sizeof req);
        memset(&once, 0, sizeof once);
        once.max_attempts = 1; /* the loop here is the retry */
        req.retry = &once;
        req.on_body = asb__watch_body;
        req.on_body_user = &w;
        req.fresh_connection = 1;
        req.read_timeout_ms = (tsec + 30) * 1000; /* watches are silent */
        if (deadline) req.timeout_ms = (int)(deadline - asb__now_ms()) + 1;
        req.cancel = opts->cancel;
        w.lines.line.len = 0;
        w.gone = 0;
        w.fail = ASB_OK;
        started = asb__now_ms();
        r = asb__kube_do(kc, &req, "GET", path.ptr, &resp, err);
        asb_buf_free(&path);
        if (w.lines.stopped && !w.gone) {
            /* the callback ended the watch */
            r = w.lines.result > 0 ? ASB_OK : w.fail;
            if (r != ASB_OK && err) asb__fail(err, r, "watch: stopped by the callback (%s)",
                                              asb_result_str(r));
            asb_http_response_free(&resp);
            break;
        }
        if (w.fail == ASB_ERR_TOO_LARGE || w.fail == ASB_ERR_JSON_INVALID) {
            r = asb__fail(err, w.fail, "watch: %s", w.fail == ASB_ERR_TOO_LARGE
                                                         ? "an event is larger than max_event_bytes"
                                                         : "an event is not valid JSON");
            asb_http_response_free(&resp);
            break;
        }
        if ((w.gone || resp.status == 410) && opts->gone_ends_watch) {
            /* the caller lists afresh (it learns what was deleted in the
               gap, which a restart from "0" would not show) */
            asb_http_response_free(&resp);
            char rvq[80];
            asb__quote(rvq, sizeof rvq, w.rv.len ? w.rv.ptr : "(none)", w.rv.len ? w.rv.len : 6,
                       60);
            r = asb__fail(err, ASB_ERR_KUBE_API, "watch %s: resourceVersion %s is gone (410)",
                          base.ptr, rvq);
            if (err) {
                err->http_status = 410;
                snprintf(err->reason, sizeof err->reason, "Expired");
            }
            break;
        }
        if (w.gone || resp.status == 410) {
            /* the resourceVersion is too old: start again from "0". Not at
               once: a server that answers nothing but 410 would get
               hundreds of requests a second. The pause doubles while 410s
               follow each other with no event between them, and starts
               over (100 ms) once events flow again; jittered so that many
               watchers of one apiserver do not come back together. */
            if (w.events > events0) quick_backoff = 100;
            pause = asb__jitter_ms(quick_backoff);
            quick_backoff = quick_backoff < 2500 ? quick_backoff * 2 : 5000;
            if (kc->http_desc.log.fn) {
                char rvq[80];
                asb__quote(rvq, sizeof rvq, w.rv.len ? w.rv.ptr : "(none)",
                           w.rv.len ? w.rv.len : 6, 60);
                asb__log(&kc->http_desc.log, ASB_LOG_INFO, "kube.watch.gone",
                         "watch %s: resourceVersion %s is gone (410), starting again from 0 "
                         "in %d ms",
                         base.ptr, rvq, pause);
            }
            asb_http_response_free(&resp);
            if (deadline && asb__now_ms() + pause >= deadline) {
                r = asb__fail(err, ASB_ERR_TIMEOUT,
                              "watch: deadline reached while restarting after 410 Gone");
                break;
            }
            if (asb__sleep_or_cancel(pause, opts->cancel)) {
                r = asb__fail(err, ASB_ERR_CANCELLED, "watch: cancelled");
                break;
            }
            w.rv.len = 0;
            asb_buf_append(&w.rv, "0", 1);
            w.lines.stopped = 0;
            r = ASB_OK;
            continue;
        }
        status = resp.status;
        retry_after = asb__retry_after_ms(&resp);
        asb_http_response_free(&resp);
        /* A restarting apiserver answers 503 ("before all known HTTP paths
           have been installed") and an overloaded one 429: wait and resume,
           like a dropped connection. Other refusals are final. */
        if (r == ASB_ERR_KUBE_API && (status == 429 || status == 500 || status == 502 ||
                                      status == 503 || status == 504)) {
            if (++refusals > 30 && !deadline) {
                /* no deadline to end it: a server that keeps refusing
                   for minutes is an answer (the Status message is in err) */
                break;
            }
            snprintf(last, sizeof last, "status %d", status);
            refused = 1;
            r = ASB_ERR_RECV;
        } else if (status == 200) {
            refusals = 0; /* the server took the watch: count afresh */
        }
        if (r == ASB_ERR_CANCELLED) {
            asb__fail(err, r, "watch: cancelled");
            break; /* the caller's word: never resumed */
        }
        if (r == ASB_ERR_KUBE_API || r == ASB_ERR_NOT_FOUND || r == ASB_ERR_CREDENTIALS ||
            r == ASB_ERR_TLS_VERIFY || r == ASB_ERR_TLS_CONFIG || r == ASB_ERR_INVALID_ARGUMENT)
            break; /* the server said no: retrying will not change it */
        if (r != ASB_OK) {
            /* the connection dropped or the server went away: resume from
               the last resourceVersion after a short, growing pause */
            char rvq[80];
            if (!refused) snprintf(last, sizeof last, "%s", asb_result_str(r));
            /* a refusal's Retry-After, when longer, is the server's own
               word on when to come back (up to a minute) */
            pause = asb__jitter_ms(backoff); /* watchers of a restarted apiserver spread out */
            if (refused && retry_after > pause) pause = retry_after > 60000 ? 60000 : (int)retry_after;
            if (deadline && asb__now_ms() + pause >= deadline) {
                r = asb__fail(err, ASB_ERR_TIMEOUT,
                              "watch: deadline reached while reconnecting (last: %s)", last);
                break;
            }
            asb__quote(rvq, sizeof rvq, w.rv.len ? w.rv.ptr : "(none)", w.rv.len ? w.rv.len : 6,
                       60);
            asb__log(&kc->http_desc.log, ASB_LOG_WARN, "kube.watch.reconnect",
                     "watch %s: %s; resuming from resourceVersion %s in %d ms", base.ptr, last,
                     rvq, pause);
            if (asb__sleep_or_cancel(pause, opts->cancel)) {
                r = asb__fail(err, ASB_ERR_CANCELLED, "watch: cancelled");
                break;
            }
            backoff = backoff < 3200 ? backoff * 2 : 5000;
            r = ASB_OK;
            continue;
        }
        backoff = 100;
        if (w.events > events0 || asb__now_ms() - started >= 1000) {
            /* a clean end after timeoutSeconds: resume at once */
            quick_backoff = 100;
            continue;
        }
        /* a very short watch: the stream ended within a second with no
           event (as client-go's reflector calls it). A server that does
           that on every request would get hundreds a second: pause as
           after repeated 410s */
        pause = asb__jitter_ms(quick_backoff);
        quick_backoff = quick_backoff < 2500 ? quick_backoff * 2 : 5000;
        if (deadline && asb__now_ms() + pause >= deadline) {
            r = asb__fail(err, ASB_ERR_TIMEOUT,
                          "watch: deadline reached (the server ends each watch at once)");
            break;
        }
        asb__log(&kc->http_desc.log, ASB_LOG_WARN, "kube.watch.reconnect",
                 "watch %s: the server ended the watch at once with no event; resuming in "
                 "%d ms",
                 base.ptr, pause);
        asb__sleep_ms(pause);
    }
    asb_buf_free(&base);
    asb_buf_free(&w.rv);
    asb_buf_free(&w.lines.line);
    return r;
}

/* -- informer: one shared watch per resource and namespace --------------------

   Threads that each wait for "their" object (a claim turning Ready) would
   cost the apiserver one watch each: O(sandboxes). Instead the kube client
   keeps, per resource and namespace, one informer: a thread that lists the
   namespace once, then watches all of it from the list's resourceVersion
   (bookmarks on), and hands each event to the waiter registered under the
   object's name. The apiserver sees O(namespaces) watches per client.

   Waiters register *before* their object exists (a create knows its name
   before the POST): no event about it can slip past between the create's
   answer and the registration. Until the waiter is armed (its create
   answered, with the object's UID) only its newest event is kept; arming
   replays it when it is of that UID. After a 410 Gone the informer lists
   afresh (gone_ends_watch): a waiter armed before that list began whose
   object is not in it was deleted in the gap, and gets a DELETED event
   (its wait fails at once, not at its deadline). Other drops resume from
   the last resourceVersion, so DELETED events are replayed by the server.

   Lifetime: the thread runs while waiters exist and lingers
   ASB__INFORMER_LINGER_MS after the last one leaves (its watch stopped,
   its resourceVersion kept), so a burst of creates one after another
   shares one list; then it ends. asb_kube_client_free ends it at once.
   A failure the watch does not recover from (403, credentials) fails every
   current waiter with that error and ends the thread; the next waiter
   starts a fresh one. */

#define ASB__INFORMER_BUCKETS 64
#ifndef ASB__INFORMER_LINGER_MS
#define ASB__INFORMER_LINGER_MS 2000
#endif

/* Tells one thread that watches many waiters (a batch of creates) that
   one of them is done: gen grows under mu, cv is broadcast. */
typedef struct asb__notify {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned gen;
} asb__notify;

typedef struct asb__waiter {
    struct asb__waiter *next; /* in its bucket */
    asb__notify *notify;      /* or NULL */
    struct asb__informer *inf;
    char name[254];
    char uid[64];       /* set when armed */
    asb_watch_fn fn;    /* runs on the informer's thread, under its lock */
    void *user;
    int armed;          /* the object exists: events go to fn */
    int own_seen;       /* an event of our UID arrived: another UID now
                           means the object was replaced */
    int judged;         /* armed before the running list began */
    int listed;         /* found by the running (or last) list */
    unsigned reg_gen;   /* lists started before it registered */
    char arm_rv[128];   /* the resourceVersion it was armed with */
    int done;           /* fn ended the wait (or the informer failed) */
    int gap;            /* found missing by a relist after 410 Gone */
    asb_result outcome; /* fn's negative code, or the informer's failure */
    int64_t done_at;    /* when done was set (monotonic ms) */
    asb_error err;      /* the informer's failure */
    asb_buf pending;    /* newest event line before armed */
    pthread_cond_t cond;
} asb__waiter;

typedef struct asb__informer {
    struct asb__informer *next;
    asb_kube_client *kc;
    char group[254], version[64], plural[64], ns[64];
    asb_kube_resource res; /* points into the arrays above */
    pthread_mutex_t lock;
    asb__waiter *buckets[ASB__INFORMER_BUCKETS];
    int waiters;
    int running;        /* the thread is alive */
    int joinable;       /* a thread was started and not joined */
    int stop;           /* the kube client is being freed */
    pthread_t thread;
    pthread_cond_t idle;  /* the lingering thread waits on it */
    int watching;         /* its list or watch runs (a connection open) */
    pthread_cond_t quiet; /* watching went 0 */
    asb_cancel *cancel;   /* ends the watch when the waiters are gone */
    char rv[128];         /* where the watch resumes; "" lists first */
    unsigned list_gen;    /* lists started */
    int listing;          /* one runs now */
    char list_rv[128];    /* the resourceVersion of the last complete one */
    /* for tests and logs */
    unsigned lists, watches, relists, gap_deletes, threads;
} asb__informer;

static unsigned asb__name_hash(const char *s) {
    unsigned h = 2166136261u;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 16777619u;
    return h % ASB__INFORMER_BUCKETS;
}

static asb__waiter *asb__informer_find(asb__informer *inf, const char *name) {
    asb__waiter *w = inf->buckets[asb__name_hash(name)];
    while (w && strcmp(w->name, name) != 0) w = w->next;
    return w;
}

/* The event's type and object token, from a parsed event line. */
static int asb__event_decode(const asb_json_doc *d, asb_watch_event *ev, char *rv, size_t rvcap) {
    int type = asb_json_find(d, 0, "type");
    memset(ev, 0, sizeof *ev);
    ev->doc = d;
    ev->object = asb_json_find(d, 0, "object");
    if (asb_json_string_eq(d, type, "ADDED", 5)) ev->type = ASB_WATCH_ADDED;
    else if (asb_json_string_eq(d, type, "MODIFIED", 8)) ev->type = ASB_WATCH_MODIFIED;
    else if (asb_json_string_eq(d, type, "DELETED", 7)) ev->type = ASB_WATCH_DELETED;
    rv[0] = '\0';
    asb_json_get_string(d, asb_json_find(d, ev->object, "metadata.resourceVersion"), rv, rvcap,
                        NULL);
    ev->resource_version = rv;
    return ev->type && ev->object >= 0;
}

static void asb__waiter_finish(asb__waiter *w, int rc) {
    w->done = 1;
    w->done_at = asb__now_ms();
    if (rc < 0) w->outcome = (asb_result)rc;
    pthread_cond_signal(&w->cond);
    if (w->notify) { /* lock order: the informer's, then this one */
        pthread_mutex_lock(&w->notify->mu);
        w->notify->gen++;
        pthread_cond_broadcast(&w->notify->cv);
        pthread_mutex_unlock(&w->notify->mu);
    }
}

/* One event for one waiter, the informer's lock held. `authoritative`: a
   relist's state of an object armed before the list began. */
static void asb__waiter_deliver(asb__waiter *w, const asb_watch_event *ev, int authoritative) {
    char uid[64] = "";
    int rc;
    if (w->done) return;
    if (!w->armed) { /* keep the newest: arming replays it */
        w->pending.len = 0;
        if (asb_buf_append(&w->pending, ev->doc->js, ev->doc->len) != ASB_OK) w->pending.len = 0;
        return;
    }
    asb_json_get_string(ev->doc, asb_json_find(ev->doc, ev->object, "metadata.uid"), uid,
                        sizeof uid, NULL);
    if (w->uid[0] && uid[0]) {
        if (strcmp(uid, w->uid) == 0) w->own_seen = 1;
        else if (!w->own_seen && !authoritative)
            return; /* an older object of that name, from before ours */
    }
    rc = w->fn(w->user, ev);
    if (rc != 0) asb__waiter_finish(w, rc);
}

/* The watch's callback, on the informer's thread. */
static int asb__informer_event(void *ud, const asb_watch_event *ev) {
    asb__informer *inf = (asb__informer *)ud;
    char name[254];
    size_t n = 0;
    pthread_mutex_lock(&inf->lock);
    if (ev->resource_version[0] && strlen(ev->resource_version) < sizeof inf->rv)
        snprintf(inf->rv, sizeof inf->rv, "%s", ev->resource_version);
    if (ev->type != ASB_WATCH_BOOKMARK && ev->type != ASB_WATCH_ERROR &&
        asb_json_get_string(ev->doc, asb_json_find(ev->doc, ev->object, "metadata.name"), name,
                            sizeof name, &n) == ASB_OK &&
        n == strlen(name)) {
        asb__waiter *w = asb__informer_find(inf, name);
        if (w) asb__waiter_deliver(w, ev, 0);
    }
    pthread_mutex_unlock(&inf->lock);
    return 0;
}

/* A DELETED event made up for a waiter whose object a relist did not
   find: the same callback path as a real one. */
static void asb__waiter_gone(asb__waiter *w, const asb_allocator *a) {
    asb_buf line;
    asb_json_writer jw;
    asb_json_doc d;
    asb_watch_event ev;
    char rv[8];
    asb_buf_init(&line, a);
    asb_json_writer_init(&jw, &line);
    asb_json_object_begin(&jw);
    asb_json_key(&jw, "type");
    asb_json_string(&jw, "DELETED");
    asb_json_key(&jw, "object");
    asb_json_object_begin(&jw);
    asb_json_key(&jw, "metadata");
    asb_json_object_begin(&jw);
    asb_json_key(&jw, "name");
    asb_json_string(&jw, w->name);
    asb_json_key(&jw, "uid");
    asb_json_string(&jw, w->uid);
    asb_json_object_end(&jw);
    asb_json_object_end(&jw);
    asb_json_object_end(&jw);
    w->gap = 1;
    if (asb_json_writer_finish(&jw) == ASB_OK &&
        asb_json_doc_parse(&d, line.ptr, line.len, a, NULL) == ASB_OK) {
        if (asb__event_decode(&d, &ev, rv, sizeof rv)) asb__waiter_deliver(w, &ev, 1);
        asb_json_doc_free(&d);
    }
    /* whatever fn made of it, the object is gone: the wait is over */
    if (!w->done) asb__waiter_finish(w, ASB_ERR_NOT_FOUND);
    asb_buf_free(&line);
}

/* a <= b for two resourceVersions, when both are decimal numbers (as
   every etcd-backed apiserver makes them; the API calls them opaque, so
   anything else is "cannot tell": 0). */
static int asb__rv_le(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b), i;
    if (!la || !lb || la > 20 || lb > 20) return 0;
    for (i = 0; i < la; i++)
        if (a[i] < '0' || a[i] > '9') return 0;
    for (i = 0; i < lb; i++)
        if (b[i] < '0' || b[i] > '9') return 0;
    while (la > 1 && *a == '0') a++, la--;
    while (lb > 1 && *b == '0') b++, lb--;
    return la != lb ? la < lb : strcmp(a, b) <= 0;
}

/* Whether a complete list that began after w registered shows that w's
   object is gone: it is not in the list, yet it existed before the list
   began (armed then) or at a resourceVersion the list covers. Such an
   object was deleted before the list's snapshot, and the watch that
   follows the list will never mention it. Lock held. */
static int asb__waiter_missed(const asb__waiter *w, unsigned gen, const char *list_rv) {
    if (w->done || w->listed || !w->armed || w->reg_gen >= gen) return 0;
    return w->judged || asb__rv_le(w->arm_rv, list_rv);
}

/* One page of the list, cancelled with the watch (the last waiter gone,
   or the client freed). */
static asb_result asb__informer_list_page(asb__informer *inf, const asb_kube_list_opts *lo,
                                          asb_buf *out, asb_error *err) {
    asb_buf path;
    asb_http_request req;
    asb_http_response resp;
    asb_result r;
    int first = 1;
    char num[24];
    asb_buf_init(&path, &inf->kc->alloc);
    r = asb__kube_path(&inf->res, inf->ns, NULL, &path, err);
    snprintf(num, sizeof num, "%d", lo->limit);
    if (r == ASB_OK) r = asb__kube_query(&path, &first, "limit", num);
    if (r == ASB_OK && lo->continue_token)
        r = asb__kube_query(&path, &first, "continue", lo->continue_token);
    if (r == ASB_OK) {
        memset(&req, 0, sizeof req);
        req.cancel = inf->cancel;
        r = asb__kube_do(inf->kc, &req, "GET", path.ptr, &resp, err);
        if (r == ASB_OK && resp.body.len) r = asb_buf_append(out, resp.body.ptr, resp.body.len);
        asb_http_response_free(&resp);
    } else if (r != ASB_ERR_INVALID_ARGUMENT) {
        r = asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "list: out of memory");
    }
    asb_buf_free(&path);
    return r;
}

/* Lists the namespace (pages of 500) and hands each waited-for object's
   state to its waiter; a waiter armed before the list began whose object
   is missing was deleted while no watch ran. Sets inf->rv. */
static asb_result asb__informer_list(asb__informer *inf, asb_error *err) {
    asb_kube_list_opts lo;
    asb_buf page, cont;
    asb_result r;
    char rv[128] = "";
    int b, restarts = 0;
    asb__waiter *w;
    memset(&lo, 0, sizeof lo);
    lo.limit = 500;
    asb_buf_init(&page, &inf->kc->alloc);
    asb_buf_init(&cont, &inf->kc->alloc);
again:
    pthread_mutex_lock(&inf->lock);
    for (b = 0; b < ASB__INFORMER_BUCKETS; b++)
        for (w = inf->buckets[b]; w; w = w->next) {
            w->judged = w->armed;
            w->listed = 0;
        }
    inf->lists++;
    inf->list_gen++;
    inf->listing = 1;
    pthread_mutex_unlock(&inf->lock);
    cont.len = 0;
    rv[0] = '\0';
    for (;;) {
        asb_json_doc d;
        asb_json_iter it;
        int item;
        page.len = 0;
        lo.continue_token = cont.len ? cont.ptr : NULL;
        r = asb__informer_list_page(inf, &lo, &page, err);
        if (r == ASB_ERR_KUBE_API && err && err->http_status == 410 && restarts++ < 3)
            goto again; /* the continue token expired: from the top */
        if (r != ASB_OK) break;
        if (asb_json_doc_parse(&d, page.ptr, page.len, &inf->kc->alloc, NULL) != ASB_OK) {
            r = asb__fail(err, ASB_ERR_JSON_INVALID, "list %s: the answer is not JSON",
                          inf->res.plural);
            break;
        }
        if (!rv[0])
            asb_json_get_string(&d, asb_json_find(&d, 0, "metadata.resourceVersion"), rv,
                                sizeof rv, NULL);
        cont.len = 0;
        {
            char c[4096];
            size_t n = 0;
            if (asb_json_get_string(&d, asb_json_find(&d, 0, "metadata.continue"), c, sizeof c,
                                    &n) == ASB_OK && n)
                asb_buf_append(&cont, c, n);
        }
        it = asb_json_iter_begin(&d, asb_json_find(&d, 0, "items"));
        pthread_mutex_lock(&inf->lock);
        while (asb_json_iter_next(&d, &it, NULL, &item)) {
            char name[254];
            size_t n = 0;
            if (asb_json_get_string(&d, asb_json_find(&d, item, "metadata.name"), name,
                                    sizeof name, &n) != ASB_OK || n != strlen(name))
                continue;
            w = asb__informer_find(inf, name);
            if (w && !w->done) {
                /* handed over as an event line of its own, so fn sees the
                   same shape as from the watch (and pending keeps it) */
                asb_buf line;
                asb_json_doc ed;
                asb_watch_event ev;
                char erv[128];
                asb_buf_init(&line, &inf->kc->alloc);
                asb_buf_append(&line, "{\"type\":\"ADDED\",\"object\":", 25);
                asb_buf_append(&line, d.js + d.toks[item].start,
                               (size_t)(d.toks[item].end - d.toks[item].start));
                if (asb_buf_append(&line, "}", 1) == ASB_OK &&
                    asb_json_doc_parse(&ed, line.ptr, line.len, &inf->kc->alloc, NULL) == ASB_OK) {
                    if (asb__event_decode(&ed, &ev, erv, sizeof erv)) {
                        w->listed = 1;
                        asb__waiter_deliver(w, &ev, w->judged);
                    }
                    asb_json_doc_free(&ed);
                }
                asb_buf_free(&line);
            }
        }
        pthread_mutex_unlock(&inf->lock);
        asb_json_doc_free(&d);
        if (!cont.len) break;
    }
    pthread_mutex_lock(&inf->lock);
    inf->listing = 0;
    if (r == ASB_OK) {
        snprintf(inf->list_rv, sizeof inf->list_rv, "%s", rv);
        for (b = 0; b < ASB__INFORMER_BUCKETS; b++)
            for (w = inf->buckets[b]; w; w = w->next)
                if (asb__waiter_missed(w, inf->list_gen, inf->list_rv)) {
                    inf->gap_deletes++;
                    asb__waiter_gone(w, &inf->kc->alloc);
                }
        snprintf(inf->rv, sizeof inf->rv, "%s", rv[0] ? rv : "0");
    } else {
        inf->list_rv[0] = '\0';
    }
    pthread_mutex_unlock(&inf->lock);
    asb_buf_free(&page);
    asb_buf_free(&cont);
    return r;
}

/* Every current waiter fails with the informer's error. Lock held. */
static void asb__informer_fail_all(asb__informer *inf, asb_result r, const asb_error *e) {
    int b;
    asb__waiter *w;
    for (b = 0; b < ASB__INFORMER_BUCKETS; b++)
        for (w = inf->buckets[b]; w; w = w->next)
            if (!w->done) {
                w->err = *e;
                w->err.code = r;
                asb__waiter_finish(w, r);
            }
}

static void *asb__informer_main(void *arg) {
    asb__informer *inf = (asb__informer *)arg;
    asb_kube_client *kc = inf->kc;
    pthread_mutex_lock(&inf->lock);
    for (;;) {
        asb_watch_opts wo;
        asb_error e;
        asb_result r = ASB_OK;
        char rv[128];
        if (!inf->stop && inf->waiters == 0) {
            /* linger: a create right after the last one needs no list */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += ASB__INFORMER_LINGER_MS / 1000;
            ts.tv_nsec += (long)(ASB__INFORMER_LINGER_MS % 1000) * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            while (!inf->stop && inf->waiters == 0)
                if (pthread_cond_timedwait(&inf->idle, &inf->lock, &ts) == ETIMEDOUT) break;
        }
        if (inf->stop || inf->waiters == 0) break;
        asb_cancel_reset(inf->cancel); /* under the lock, as every trigger */
        snprintf(rv, sizeof rv, "%s", inf->rv);
        inf->watching = 1;
        pthread_mutex_unlock(&inf->lock);
        memset(&e, 0, sizeof e);
        if (!rv[0]) {
            asb__log(&kc->http_desc.log, ASB_LOG_DEBUG, "kube.informer",
                     "%s in %s: listing, then one watch for every waiter", inf->res.plural,
                     inf->ns);
            r = asb__informer_list(inf, &e);
            pthread_mutex_lock(&inf->lock);
            snprintf(rv, sizeof rv, "%s", inf->rv);
            pthread_mutex_unlock(&inf->lock);
        }
        if (r == ASB_OK) {
            memset(&wo, 0, sizeof wo);
            wo.resource_version = rv;
            wo.cancel = inf->cancel;
            wo.gone_ends_watch = 1;
            wo.bookmarks_to_callback = 1;
            pthread_mutex_lock(&inf->lock);
            inf->watches++;
            pthread_mutex_unlock(&inf->lock);
            r = asb_kube_watch(kc, &inf->res, inf->ns, &wo, asb__informer_event, inf, &e);
        }
        pthread_mutex_lock(&inf->lock);
        inf->watching = 0;
        pthread_cond_broadcast(&inf->quiet);
        if (r == ASB_ERR_CANCELLED) continue; /* no waiters left (or stop) */
        if (r == ASB_ERR_KUBE_API && e.http_status == 410) {
            inf->rv[0] = '\0'; /* list again: what was deleted meanwhile shows */
            inf->relists++;
            asb__log(&kc->http_desc.log, ASB_LOG_INFO, "kube.informer",
                     "%s in %s: 410 Gone, listing afresh", inf->res.plural, inf->ns);
            continue;
        }
        /* not recoverable here (the watch resumes on its own from drops,
           429 and 5xx): the waiters get the error, the thread ends */
        asb__informer_fail_all(inf, r == ASB_OK ? ASB_ERR_KUBE_API : r, &e);
        inf->rv[0] = '\0';
        break;
    }
    inf->running = 0;
    pthread_mutex_unlock(&inf->lock);
    return NULL;
}

/* The informer's thread runs (or a lingering one resumes). Lock held. */
static asb_result asb__informer_start_locked(asb__informer *inf, asb_error *err) {
    pthread_attr_t at;
    sigset_t all, old;
    int rc;
    if (inf->running) {
        pthread_cond_signal(&inf->idle); /* a lingering thread resumes */
        return ASB_OK;
    }
    if (inf->joinable) { /* ended: it only returns after unlocking */
        pthread_join(inf->thread, NULL);
        inf->joinable = 0;
    }
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, 512 * 1024);
    sigfillset(&all); /* the program's signals go to its own threads */
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&inf->thread, &at, asb__informer_main, inf);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&at);
    if (rc != 0)
        return asb__fail(err, ASB_ERR_IO, "watch: cannot start its thread: %s", strerror(rc));
    inf->running = inf->joinable = 1;
    inf->threads++;
    return ASB_OK;
}

/* Registers a waiter for `name` under the shared watch of (res, ns),
   starting the informer's thread when none runs; uid non-NULL: an object
   that exists already, armed at once (asb__informer_arm otherwise, once
   it exists). fn runs on that thread,
   under the informer's lock, for each event of the object once armed; its
   1 ends the wait with ASB_OK, a negative code with that code.
   Ownership: *out is released with asb__informer_leave. */
static ASB__MAYBE_UNUSED asb_result asb__informer_join(asb_kube_client *kc, const asb_kube_resource *res,
                                     const char *ns, const char *name, const char *uid,
                                     asb_watch_fn fn, void *user, asb__waiter **out,
                                     asb_error *err) {
    asb__informer *inf;
    asb__waiter *w;
    const char *g = res->group ? res->group : "";
    unsigned h;
    *out = NULL;
    if (strlen(name) >= sizeof w->name || strlen(g) >= sizeof inf->group ||
        strlen(res->version) >= sizeof inf->version ||
        strlen(res->plural) >= sizeof inf->plural || strlen(ns) >= sizeof inf->ns)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "watch: name too long");
    pthread_mutex_lock(&kc->lock);
    for (inf = kc->informers; inf; inf = inf->next)
        if (strcmp(inf->group, g) == 0 && strcmp(inf->version, res->version) == 0 &&
            strcmp(inf->plural, res->plural) == 0 && strcmp(inf->ns, ns) == 0)
            break;
    if (!inf) {
        inf = (asb__informer *)kc->alloc.alloc_fn(sizeof *inf, kc->alloc.user_data);
        if (!inf || asb_cancel_create(&kc->alloc, &(inf->cancel), err) != ASB_OK) {
            if (inf) kc->alloc.free_fn(inf, kc->alloc.user_data);
            pthread_mutex_unlock(&kc->lock);
            return asb__fail(err, inf ? ASB_ERR_IO : ASB_ERR_OUT_OF_MEMORY,
                             "watch: cannot set up the shared watch");
        }
        {
            asb_cancel *cancel = inf->cancel;
            memset(inf, 0, sizeof *inf);
            inf->cancel = cancel;
        }
        inf->kc = kc;
        snprintf(inf->group, sizeof inf->group, "%s", g);
        snprintf(inf->version, sizeof inf->version, "%s", res->version);
        snprintf(inf->plural, sizeof inf->plural, "%s", res->plural);
        snprintf(inf->ns, sizeof inf->ns, "%s", ns);
        inf->res.group = inf->group;
        inf->res.version = inf->version;
        inf->res.plural = inf->plural;
        pthread_mutex_init(&inf->lock, NULL);
        pthread_cond_init(&inf->idle, NULL);
        pthread_cond_init(&inf->quiet, NULL);
        inf->next = kc->informers;
        kc->informers = inf;
    }
    pthread_mutex_unlock(&kc->lock);
    w = (asb__waiter *)kc->alloc.alloc_fn(sizeof *w, kc->alloc.user_data);
    if (!w) return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "watch: out of memory");
    memset(w, 0, sizeof *w);
    w->inf = inf;
    snprintf(w->name, sizeof w->name, "%s", name);
    w->fn = fn;
    w->user = user;
    if (uid) { /* the object exists already: armed from the start */
        snprintf(w->uid, sizeof w->uid, "%s", uid);
        w->armed = 1;
    }
    asb_buf_init(&w->pending, &kc->alloc);
    pthread_cond_init(&w->cond, NULL);
    h = asb__name_hash(name);
    pthread_mutex_lock(&inf->lock);
    w->reg_gen = inf->list_gen;
    w->next = inf->buckets[h];
    inf->buckets[h] = w;
    inf->waiters++;
    /* a waiter for an object still to be made starts nothing yet: a
       create whose POST fails costs no list (arming starts the thread) */
    if (w->armed && asb__informer_start_locked(inf, err) != ASB_OK) {
        inf->buckets[h] = w->next;
        inf->waiters--;
        pthread_mutex_unlock(&inf->lock);
        pthread_cond_destroy(&w->cond);
        kc->alloc.free_fn(w, kc->alloc.user_data);
        return ASB_ERR_IO;
    }
    pthread_mutex_unlock(&inf->lock);
    *out = w;
    return ASB_OK;
}

/* The waiter's object exists now with this UID (uid NULL or "": not
   known), as of resourceVersion rv (the create's answer; NULL: not
   known): events go to fn from here on, the newest one kept so far
   first. */
static ASB__MAYBE_UNUSED void asb__informer_arm(asb__waiter *w, const char *uid,
                                                 const char *rv) {
    asb__informer *inf = w->inf;
    pthread_mutex_lock(&inf->lock);
    snprintf(w->uid, sizeof w->uid, "%s", uid ? uid : "");
    if (rv && strlen(rv) < sizeof w->arm_rv) snprintf(w->arm_rv, sizeof w->arm_rv, "%s", rv);
    w->armed = 1;
    if (asb__informer_start_locked(inf, &w->err) != ASB_OK) { /* no thread: the wait fails */
        asb__waiter_finish(w, ASB_ERR_IO);
        pthread_mutex_unlock(&inf->lock);
        return;
    }
    if (w->pending.len && !w->done) {
        asb_json_doc d;
        asb_watch_event ev;
        char erv[128], puid[64] = "";
        if (asb_json_doc_parse(&d, w->pending.ptr, w->pending.len, &inf->kc->alloc, NULL) ==
            ASB_OK) {
            if (asb__event_decode(&d, &ev, erv, sizeof erv)) {
                asb_json_get_string(&d, asb_json_find(&d, ev.object, "metadata.uid"), puid,
                                    sizeof puid, NULL);
                if (!w->uid[0] || strcmp(puid, w->uid) == 0) asb__waiter_deliver(w, &ev, 0);
            }
            asb_json_doc_free(&d);
        }
    }
    w->pending.len = 0;
    /* a list that ran since it registered did not have it, though it
       existed at a version the list covers: deleted before the list */
    if (!inf->listing && asb__waiter_missed(w, inf->list_gen, inf->list_rv)) {
        inf->gap_deletes++;
        asb__waiter_gone(w, &inf->kc->alloc);
    }
    pthread_mutex_unlock(&inf->lock);
}

/* Waits until fn ends the wait, the deadline (monotonic ms, 0: none:
   ASB_ERR_TIMEOUT, also when fn ended it after the deadline) or the token
   (ASB_ERR_CANCELLED). Returns ASB_OK when
   fn returned 1, fn's negative code, ASB_ERR_NOT_FOUND for an object
   found missing after a watch gap that fn did not end, or the informer's
   own failure (its detail in err). *gap tells the gap case apart. */
static ASB__MAYBE_UNUSED asb_result asb__informer_wait(asb__waiter *w, int64_t deadline, const asb_cancel *cancel,
                                     int *gap, asb_error *err) {
    asb__informer *inf = w->inf;
    asb_result r = ASB_OK;
    pthread_mutex_lock(&inf->lock);
    while (!w->done) {
        int64_t now = asb__now_ms(), wake = deadline ? deadline : now + 3600000;
        struct timespec ts;
        if (deadline && now >= deadline) {
            r = ASB_ERR_TIMEOUT;
            break;
        }
        if (cancel && wake > now + 50) wake = now + 50; /* the token is a pipe: looked at */
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += (time_t)((wake - now) / 1000);
        ts.tv_nsec += (long)((wake - now) % 1000) * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&w->cond, &inf->lock, &ts);
        if (!w->done && cancel && asb_cancel_is_triggered(cancel)) {
            r = ASB_ERR_CANCELLED;
            break;
        }
    }
    if (w->done && deadline && w->done_at > deadline) {
        r = ASB_ERR_TIMEOUT; /* it ended, but after the deadline */
    } else if (w->done) {
        r = w->outcome;
        if (r != ASB_OK && w->err.code == r && err) *err = w->err;
    }
    if (gap) *gap = w->gap;
    pthread_mutex_unlock(&inf->lock);
    return r;
}

/* 1 once the wait is over (fn ended it, or the informer failed). */
static ASB__MAYBE_UNUSED int asb__informer_done(asb__waiter *w) {
    int done;
    pthread_mutex_lock(&w->inf->lock);
    done = w->done;
    pthread_mutex_unlock(&w->inf->lock);
    return done;
}

/* From now on the end of this waiter's wait is also told to n. */
static ASB__MAYBE_UNUSED void asb__informer_notify(asb__waiter *w, asb__notify *n) {
    pthread_mutex_lock(&w->inf->lock);
    w->notify = n;
    if (w->done && n) {
        pthread_mutex_lock(&n->mu);
        n->gen++;
        pthread_cond_broadcast(&n->cv);
        pthread_mutex_unlock(&n->mu);
    }
    pthread_mutex_unlock(&w->inf->lock);
}

/* Unregisters and frees the waiter; the last one out stops the watch
   (the thread lingers a while before it ends). NULL is harmless. */
static ASB__MAYBE_UNUSED void asb__informer_leave(asb__waiter *w) {
    asb__informer *inf;
    asb__waiter **pp;
    if (!w) return;
    inf = w->inf;
    pthread_mutex_lock(&inf->lock);
    for (pp = &inf->buckets[asb__name_hash(w->name)]; *pp; pp = &(*pp)->next)
        if (*pp == w) {
            *pp = w->next;
            break;
        }
    if (--inf->waiters == 0) {
        /* the watch stops, and its connection is closed before the last
           create returns: a program counting its descriptors between
           creates sees none of ours (the thread lingers, idle) */
        int64_t until = asb__now_ms() + 2000;
        asb_cancel_trigger(inf->cancel);
        while (inf->watching && inf->waiters == 0 && asb__now_ms() < until) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 100000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&inf->quiet, &inf->lock, &ts);
        }
    }
    pthread_mutex_unlock(&inf->lock);
    pthread_cond_destroy(&w->cond);
    asb_buf_free(&w->pending);
    inf->kc->alloc.free_fn(w, inf->kc->alloc.user_data);
}

/* Ends every informer's thread and frees them (asb_kube_client_free: no
   waiter is left, by the caller's promise). */
static void asb__informers_free(asb_kube_client *kc) {
    asb__informer *inf = kc->informers, *next;
    for (; inf; inf = next) {
        next = inf->next;
        pthread_mutex_lock(&inf->lock);
        inf->stop = 1;
        asb_cancel_trigger(inf->cancel);
        pthread_cond_broadcast(&inf->idle);
        pthread_mutex_unlock(&inf->lock);
        if (inf->joinable) pthread_join(inf->thread, NULL);
        pthread_cond_destroy(&inf->idle);
        pthread_cond_destroy(&inf->quiet);
        pthread_mutex_destroy(&inf->lock);
        asb_cancel_free(inf->cancel);
        kc->alloc.free_fn(inf, kc->alloc.user_data);
    }
    kc->informers = NULL;
}

/* Grows the kube client's connection pool for n requests at once (the
   current HTTP client, and the one an exec plugin's rotation makes). */
static void asb__kube_pool_grow(asb_kube_client *kc, int n) {
    asb__kube_http *h;
    pthread_mutex_lock(&kc->lock);
    if (kc->http_desc.max_idle_connections >= 0 && kc->http_desc.max_idle_connections < n)
        kc->http_desc.max_idle_connections = n > ASB__MAX_POOL ? ASB__MAX_POOL : n;
    h = kc->http;
    if (h) h->refs++;
    pthread_mutex_unlock(&kc->lock);
    if (h) {
        asb__http_pool_grow(h->http, n);
        asb__kube_http_release(kc, h);
    }
}

/* >>websocket ===============================================================
   RFC 6455 client. The upgrade is one more request of the kube client (its
   credentials, its HTTP client's pool settings, proxy and TLS), after
   which the connection belongs to the WebSocket: its socket stays
   non-blocking and TLS reads and writes never wait inside mbedTLS, so a
   relay can poll the socket beside another one. */

/* -- SHA-1, for Sec-WebSocket-Accept only (FIPS 180-4). The handshake
   check is not a security boundary (TLS is); SHA-1 is what RFC 6455
   names, and a build without mbedTLS (plain-HTTP apiservers, kubectl
   proxy) needs it too. */
static uint32_t asb__rol32(uint32_t v, int n) {
    return (uint32_t)(v << n) | (v >> (32 - n));
}

static void asb__sha1_block(uint32_t h[5], const unsigned char *p) {
    uint32_t w[80], a, b, c, d, e, f, k, t;
    int i;
    for (i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (i = 16; i < 80; i++) w[i] = asb__rol32(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    a = h[0];
    b = h[1];
    c = h[2];
    d = h[3];
    e = h[4];
    for (i = 0; i < 80; i++) {
        if (i < 20) {
            f = (b & c) | (~b & d);
            k = 0x5A827999u;
        } else if (i < 40) {
            f = b ^ c ^ d;
            k = 0x6ED9EBA1u;
        } else if (i < 60) {
            f = (b & c) | (b & d) | (c & d);
            k = 0x8F1BBCDCu;
        } else {
            f = b ^ c ^ d;
            k = 0xCA62C1D6u;
        }
        t = asb__rol32(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = asb__rol32(b, 30);
        b = a;
        a = t;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
}

static void asb__sha1(const void *data, size_t len, unsigned char out[20]) {
    uint32_t h[5] = {0x67452301u, 0xEFCDAB89u, 0x98BADCFEu, 0x10325476u, 0xC3D2E1F0u};
    const unsigned char *p = (const unsigned char *)data;
    unsigned char blk[128];
    size_t rest = len, tail, i;
    uint64_t bits = (uint64_t)len * 8;
    while (rest >= 64) {
        asb__sha1_block(h, p);
        p += 64;
        rest -= 64;
    }
    memset(blk, 0, sizeof blk);
    memcpy(blk, p, rest);
    blk[rest] = 0x80;
    tail = rest + 1 + 8 <= 64 ? 64 : 128;
    for (i = 0; i < 8; i++) blk[tail - 1 - i] = (unsigned char)(bits >> (8 * i));
    asb__sha1_block(h, blk);
    if (tail == 128) asb__sha1_block(h, blk + 64);
    for (i = 0; i < 20; i++) out[i] = (unsigned char)(h[i / 4] >> (24 - 8 * (i % 4)));
}

/* base64(SHA-1(key + the RFC's GUID)), what the server must echo. */
static void asb__ws_accept_for(const char *key, char out[29]) {
    static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char cat[128];
    unsigned char d[20];
    size_t kl = strlen(key), i, o = 0;
    if (kl > sizeof cat - sizeof guid) kl = sizeof cat - sizeof guid;
    memcpy(cat, key, kl);
    memcpy(cat + kl, guid, sizeof guid - 1);
    asb__sha1(cat, kl + sizeof guid - 1, d);
    for (i = 0; i < 18; i += 3) {
        uint32_t v = (uint32_t)d[i] << 16 | (uint32_t)d[i + 1] << 8 | d[i + 2];
        out[o++] = b64[v >> 18 & 63];
        out[o++] = b64[v >> 12 & 63];
        out[o++] = b64[v >> 6 & 63];
        out[o++] = b64[v & 63];
    }
    {
        uint32_t v = (uint32_t)d[18] << 16 | (uint32_t)d[19] << 8;
        out[o++] = b64[v >> 18 & 63];
        out[o++] = b64[v >> 12 & 63];
        out[o++] = b64[v >> 6 & 63];
        out[o++] = '=';
    }
    out[o] = '\0';
}

/* -- frames in --------------------------------------------------------------- */

/* One frame's header (RFC 6455 5.2). */
typedef struct asb__ws_frame {
    int fin, opcode;
    uint64_t len;  /* payload bytes */
    size_t head;   /* header bytes (a server frame has no mask) */
} asb__ws_frame;

/* Reassembles a server's byte stream into messages and control frames.
   Input bytes are appended to `in`; asb__ws_next takes them. */
typedef struct asb__ws_reader {
    asb_buf in;
    size_t pos;            /* next unread byte of in */
    asb_buf msg;           /* the fragments of the message in progress */
    int msg_op;            /* its opcode (TEXT/BINARY), 0: none */
    int msg_done;          /* msg was handed out: empty it first */
    size_t max_message;
    unsigned char ctl[125]; /* the last control frame's payload */
    size_t ctl_len;
    const char *why;       /* after -1: what was wrong (static text) */
    int close_code;        /* after -1: the close code to send */
} asb__ws_reader;

static int asb__ws_bad(asb__ws_reader *r, int code, const char *why) {
    r->why = why;
    r->close_code = code;
    return -1;
}

/* Parses a frame header at p[0, n): 1 done, 0 more bytes needed, -1 a
   violation (r->why, r->close_code). */
static int asb__ws_frame_head(asb__ws_reader *r, const unsigned char *p, size_t n,
                              asb__ws_frame *f) {
    unsigned len7;
    if (n < 2) return 0;
    f->fin = p[0] >> 7;
    f->opcode = p[0] & 0x0f;
    if (p[0] & 0x70)
        return asb__ws_bad(r, 1002, "a frame sets reserved bits (no extension was agreed)");
    if (f->opcode != 0 && f->opcode != 1 && f->opcode != 2 && f->opcode != 8 && f->opcode != 9 &&
        f->opcode != 10)
        return asb__ws_bad(r, 1002, "a frame has an unknown opcode");
    if (p[1] & 0x80) return asb__ws_bad(r, 1002, "a server frame is masked (RFC 6455 5.1)");
    len7 = p[1] & 0x7fu;
    if (len7 < 126) {
        f->len = len7;
        f->head = 2;
    } else if (len7 == 126) {
        if (n < 4) return 0;
        f->len = (uint64_t)p[2] << 8 | p[3];
        f->head = 4;
        if (f->len < 126) return asb__ws_bad(r, 1002, "a frame length is not minimally encoded");
    } else {
        int i;
        if (n < 10) return 0;
        if (p[2] & 0x80) return asb__ws_bad(r, 1002, "a frame length has its top bit set");
        f->len = 0;
        for (i = 2; i < 10; i++) f->len = f->len << 8 | p[i];
        f->head = 10;
        if (f->len < 65536) return asb__ws_bad(r, 1002, "a frame length is not minimally encoded");
    }
    if (f->opcode >= 8 && (!f->fin || f->len > 125))
        return asb__ws_bad(r, 1002, "a control frame is fragmented or over 125 bytes");
    return 1;
}

static int asb__ws_utf8_ok(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        int k = asb__utf8_seq(s + i, n - i);
        if (k <= 0) return 0;
        i += (size_t)k;
    }
    return 1;
}

/* Close codes a peer may send (RFC 6455 7.4, the IANA registry). */
static int asb__ws_close_code_ok(unsigned code) {
    return (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
           (code >= 3000 && code <= 4999);
}

/* The next message or control frame: 1 with *op and *payload (a data
   message borrowed until the next call; a control payload in r->ctl), 0
   when more bytes are needed, -1 for a violation (r->why, r->close_code;
   1009 for a message over max_message). */
static int asb__ws_next(asb__ws_reader *r, int *op, asb_str *payload) {
    if (r->msg_done) {
        r->msg.len = 0;
        r->msg_done = 0;
    }
    if (r->pos == r->in.len) {
        r->in.len = r->pos = 0;
    } else if (r->pos > 65536 && r->pos > r->in.len / 2) {
        memmove(r->in.ptr, r->in.ptr + r->pos, r->in.len - r->pos);
        r->in.len -= r->pos;
        r->pos = 0;
    }
    for (;;) {
        const unsigned char *p;
        size_t n = r->in.len - r->pos;
        asb__ws_frame f;
        int k;
        if (n == 0) return 0; /* (in.ptr may still be NULL) */
        p = (const unsigned char *)r->in.ptr + r->pos;
        k = asb__ws_frame_head(r, p, n, &f);
        if (k <= 0) return k;
        if (f.opcode >= 8) {
            if (n < f.head + f.len) return 0;
            r->ctl_len = (size_t)f.len;
            if (r->ctl_len) memcpy(r->ctl, p + f.head, r->ctl_len);
            r->pos += f.head + r->ctl_len;
            if (f.opcode == ASB_WS_CLOSE) {
                if (r->ctl_len == 1) return asb__ws_bad(r, 1002, "a close frame has a 1-byte body");
                if (r->ctl_len >= 2 &&
                    !asb__ws_close_code_ok((unsigned)r->ctl[0] << 8 | r->ctl[1]))
                    return asb__ws_bad(r, 1002, "a close frame has an invalid code");
                if (r->ctl_len > 2 && !asb__ws_utf8_ok(r->ctl + 2, r->ctl_len - 2))
                    return asb__ws_bad(r, 1007, "a close reason is not UTF-8");
            }
            *op = f.opcode;
            payload->ptr = (const char *)r->ctl;
            payload->len = r->ctl_len;
            return 1;
        }
        if (f.opcode == 0 && !r->msg_op)
            return asb__ws_bad(r, 1002, "a continuation frame starts no message");
        if (f.opcode != 0 && r->msg_op)
            return asb__ws_bad(r, 1002, "a new message starts inside a fragmented one");
        if (f.len > r->max_message || r->msg.len + f.len > r->max_message)
            return asb__ws_bad(r, 1009, "a message is larger than the limit");
        if (n < f.head + f.len) return 0; /* bounded: at most max_message + 10 buffered */
        if (f.fin && !r->msg_op) { /* a whole message in one frame: no copy */
            r->pos += f.head + (size_t)f.len;
            if (f.opcode == ASB_WS_TEXT && !asb__ws_utf8_ok(p + f.head, (size_t)f.len))
                return asb__ws_bad(r, 1007, "a text message is not UTF-8");
            *op = f.opcode;
            payload->ptr = (const char *)p + f.head;
            payload->len = (size_t)f.len;
            return 1;
        }
        if (f.len && asb_buf_append(&r->msg, p + f.head, (size_t)f.len) != ASB_OK)
            return asb__ws_bad(r, 1009, "out of memory for a fragmented message");
        r->pos += f.head + (size_t)f.len;
        if (!r->msg_op) r->msg_op = f.opcode;
        if (f.fin) {
            *op = r->msg_op;
            r->msg_op = 0;
            r->msg_done = 1;
            if (*op == ASB_WS_TEXT &&
                !asb__ws_utf8_ok((const unsigned char *)r->msg.ptr, r->msg.len))
                return asb__ws_bad(r, 1007, "a text message is not UTF-8");
            payload->ptr = r->msg.ptr ? r->msg.ptr : "";
            payload->len = r->msg.len;
            return 1;
        }
    }
}

static void asb__ws_reader_init(asb__ws_reader *r, const asb_allocator *a, size_t max_message) {
    memset(r, 0, sizeof *r);
    asb_buf_init(&r->in, a);
    asb_buf_init(&r->msg, a);
    r->max_message = max_message;
}

static void asb__ws_reader_free(asb__ws_reader *r) {
    asb_buf_free(&r->in);
    asb_buf_free(&r->msg);
}

/* -- the connection ------------------------------------------------------------ */

struct asb_ws {
    asb_kube_client *kc;
    asb__kube_http *http;  /* a reference: the TLS configuration lives there */
    asb__conn *c;
    asb__ws_reader rd;
    asb_buf out;           /* the frame being written */
    unsigned char rnd[64]; /* masking keys, refilled from the kernel */
    size_t rnd_pos;
    char protocol[64];
    int write_timeout_ms;
    int close_sent, close_code; /* close_code: the peer's, 0 none yet */
    char close_reason[124];
    int failed;            /* the connection is unusable */
};

#if ASB_TLS
/* Non-blocking BIO callbacks: after the upgrade mbedTLS says WANT_READ /
   WANT_WRITE and the caller polls, so a relay never blocks in TLS. */
static int asb__ws_bio_send(void *ctx, const unsigned char *buf, size_t len) {
    asb__conn *c = (asb__conn *)ctx;
#ifdef MSG_NOSIGNAL
    ssize_t n = send(c->fd, buf, len, MSG_NOSIGNAL);
#else
    ssize_t n = send(c->fd, buf, len, 0);
#endif
    if (n >= 0) return (int)n;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return MBEDTLS_ERR_SSL_WANT_WRITE;
    return MBEDTLS_ERR_NET_SEND_FAILED;
}
static int asb__ws_bio_recv(void *ctx, unsigned char *buf, size_t len) {
    asb__conn *c = (asb__conn *)ctx;
    ssize_t n = recv(c->fd, buf, len, 0);
    if (n >= 0) return (int)n;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return MBEDTLS_ERR_SSL_WANT_READ;
    return MBEDTLS_ERR_NET_RECV_FAILED;
}
#endif

/* Reads what is there: >0 bytes appended to the reader, 0 nothing now,
   -1 the peer ended the connection, -2 it failed. */
static long asb__ws_read_some(asb_ws *ws) {
    char *buf;
    size_t cap = 65536;
    long n;
    asb__conn *c = ws->c;
    /* straight into the reader's buffer: no copy */
    if (asb_buf_reserve(&ws->rd.in, cap) != ASB_OK) return -2;
    buf = ws->rd.in.ptr + ws->rd.in.len;
#if ASB_TLS
    if (c->use_tls) {
        int k = mbedtls_ssl_read(&c->ssl, (unsigned char *)buf, cap);
        if (k == MBEDTLS_ERR_SSL_WANT_READ || k == MBEDTLS_ERR_SSL_WANT_WRITE) return 0;
#ifdef MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET
        if (k == MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET) return 0; /* poll again */
#endif
        if (k == 0 || k == MBEDTLS_ERR_SSL_PEER_CLOSE_NOTIFY) return -1;
        if (k < 0) return -2;
        n = k;
    } else
#endif
    {
        ssize_t s = recv(c->fd, buf, cap, 0);
        if (s < 0) return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -2;
        if (s == 0) return -1;
        n = (long)s;
    }
    ws->rd.in.len += (size_t)n;
    ws->rd.in.ptr[ws->rd.in.len] = '\0';
    return n;
}

/* Bytes TLS has decrypted or read but not handed out: poll would not see
   them on the socket. */
static int asb__ws_has_buffered(asb_ws *ws) {
#if ASB_TLS
    if (ws->c->use_tls)
        return mbedtls_ssl_get_bytes_avail(&ws->c->ssl) > 0 || mbedtls_ssl_check_pending(&ws->c->ssl);
#endif
    (void)ws;
    return 0;
}

/* Writes everything, polling while the socket is full, within
   write_timeout_ms. */
static asb_result asb__ws_write_all(asb_ws *ws, const char *p, size_t n) {
    asb__conn *c = ws->c;
    int64_t until = asb__now_ms() + ws->write_timeout_ms;
    while (n > 0) {
        long k;
        short want = POLLOUT;
#if ASB_TLS
        if (c->use_tls) {
            int t = mbedtls_ssl_write(&c->ssl, (const unsigned char *)p, n);
            if (t == MBEDTLS_ERR_SSL_WANT_READ) want = POLLIN;
            k = t == MBEDTLS_ERR_SSL_WANT_WRITE || t == MBEDTLS_ERR_SSL_WANT_READ
                    ? 0
#ifdef MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET
                : t == MBEDTLS_ERR_SSL_RECEIVED_NEW_SESSION_TICKET ? 0
#endif
                : t < 0 ? -1 : t;
        } else
#endif
        {
#ifdef MSG_NOSIGNAL
            ssize_t s = send(c->fd, p, n, MSG_NOSIGNAL);
#else
            ssize_t s = send(c->fd, p, n, 0);
#endif
            k = s >= 0 ? (long)s
                       : (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -1);
        }
        if (k < 0) {
            ws->failed = 1;
            return ASB_ERR_SEND;
        }
        if (k > 0) {
            p += k;
            n -= (size_t)k;
            continue;
        }
        {
            struct pollfd pfd;
            int64_t left = until - asb__now_ms();
            if (left <= 0) {
                ws->failed = 1;
                return ASB_ERR_TIMEOUT;
            }
            pfd.fd = c->fd;
            pfd.events = want;
            pfd.revents = 0;
            if (poll(&pfd, 1, left > 1000 ? 1000 : (int)left) < 0 && errno != EINTR) {
                ws->failed = 1;
                return ASB_ERR_SEND;
            }
        }
    }
    return ASB_OK;
}

/* XORs p[0, n) with the 4-byte key, 8 bytes at a time (64 MiB through a
   byte loop costs more than the TLS record layer). */
static void asb__ws_mask(unsigned char *p, size_t n, const unsigned char m[4]) {
    unsigned char k8[8];
    uint64_t k;
    size_t i = 0;
    memcpy(k8, m, 4);
    memcpy(k8 + 4, m, 4);
    memcpy(&k, k8, 8);
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        w ^= k;
        memcpy(p + i, &w, 8);
    }
    for (; i < n; i++) p[i] = (unsigned char)(p[i] ^ m[i & 3]);
}

/* One masked frame: header, masking key, prefix then data, masked. */
static asb_result asb__ws_send_frame(asb_ws *ws, int opcode, const void *prefix, size_t plen,
                                     const void *data, size_t len) {
    unsigned char h[14], *m;
    size_t hl = 2, total = plen + len;
    asb_buf *o = &ws->out;
    if (ws->failed) return ASB_ERR_SEND;
    h[0] = (unsigned char)(0x80 | opcode);
    if (total < 126) {
        h[1] = (unsigned char)(0x80 | total);
    } else if (total < 65536) {
        h[1] = 0x80 | 126;
        h[2] = (unsigned char)(total >> 8);
        h[3] = (unsigned char)total;
        hl = 4;
    } else {
        int k;
        h[1] = 0x80 | 127;
        for (k = 0; k < 8; k++) h[2 + k] = (unsigned char)((uint64_t)total >> (56 - 8 * k));
        hl = 10;
    }
    if (ws->rnd_pos + 4 > sizeof ws->rnd) {
        if (asb__random_bytes(ws->rnd, sizeof ws->rnd) != ASB_OK) return ASB_ERR_IO;
        ws->rnd_pos = 0;
    }
    memcpy(h + hl, ws->rnd + ws->rnd_pos, 4);
    m = h + hl;
    ws->rnd_pos += 4;
    hl += 4;
    o->len = 0;
    if (asb_buf_reserve(o, hl + total) != ASB_OK) return ASB_ERR_OUT_OF_MEMORY;
    memcpy(o->ptr, h, hl);
    if (plen) memcpy(o->ptr + hl, prefix, plen);
    if (len) memcpy(o->ptr + hl + plen, data, len);
    asb__ws_mask((unsigned char *)o->ptr + hl, total, m);
    o->len = hl + total;
    return asb__ws_write_all(ws, o->ptr, o->len);
}

ASB_API asb_result asb_ws_send(asb_ws *ws, asb_ws_opcode opcode, const void *prefix,
                               size_t prefix_len, const void *data, size_t len,
                               asb_error *err) {
    asb_result r;
    if (!ws || (opcode != ASB_WS_TEXT && opcode != ASB_WS_BINARY && opcode != ASB_WS_PING &&
                opcode != ASB_WS_PONG) ||
        ((opcode == ASB_WS_PING || opcode == ASB_WS_PONG) && prefix_len + len > 125) ||
        (prefix_len && !prefix) || (len && !data))
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "websocket: send takes TEXT, BINARY, PING or PONG (control messages "
                         "up to 125 bytes)");
    if (ws->close_sent || ws->close_code)
        return asb__fail(err, ASB_ERR_CLOSED, "websocket: the connection is closing");
    r = asb__ws_send_frame(ws, (int)opcode, prefix, prefix_len, data, len);
    if (r != ASB_OK)
        return asb__fail(err, r, "websocket: sending a message failed (%s)", asb_result_str(r));
    return ASB_OK;
}

static asb_result asb__ws_send_close(asb_ws *ws, int code, const char *reason, size_t rlen) {
    unsigned char b[125];
    if (ws->close_sent) return ASB_OK;
    ws->close_sent = 1;
    b[0] = (unsigned char)(code >> 8);
    b[1] = (unsigned char)code;
    if (rlen > 123) rlen = 123;
    if (rlen) memcpy(b + 2, reason, rlen);
    return asb__ws_send_frame(ws, ASB_WS_CLOSE, NULL, 0, b, 2 + rlen);
}

/* Handles one control frame: ping answered, pong dropped, close noted
   (and answered). 1 when it was a close. */
static int asb__ws_control(asb_ws *ws, int op, asb_str pl) {
    if (op == ASB_WS_PING) {
        if (!ws->close_sent) asb__ws_send_frame(ws, ASB_WS_PONG, NULL, 0, pl.ptr, pl.len);
        return 0;
    }
    if (op != ASB_WS_CLOSE) return 0;
    ws->close_code = pl.len >= 2 ? ((unsigned char)pl.ptr[0] << 8 | (unsigned char)pl.ptr[1])
                                 : 1005;
    asb__quote(ws->close_reason, sizeof ws->close_reason, pl.len > 2 ? pl.ptr + 2 : "",
               pl.len > 2 ? pl.len - 2 : 0, 100);
    /* echo the code, as RFC 6455 5.5.1 asks */
    asb__ws_send_close(ws, ws->close_code == 1005 ? 1000 : ws->close_code, NULL, 0);
    return 1;
}

/* Waits for the socket to turn readable (or buffered TLS bytes): 1
   ready, 0 timeout, -1 error. timeout_ms <= 0: no limit. */
static int asb__ws_wait(asb_ws *ws, int64_t until) {
    for (;;) {
        struct pollfd pfd;
        int64_t left = until ? until - asb__now_ms() : 1000;
        int k;
        if (asb__ws_has_buffered(ws)) return 1;
        if (until && left <= 0) return 0;
        pfd.fd = ws->c->fd;
        pfd.events = POLLIN;
        pfd.revents = 0;
        k = poll(&pfd, 1, left > 1000 ? 1000 : (int)left);
        if (k > 0) return 1;
        if (k < 0 && errno != EINTR) return -1;
    }
}

ASB_API asb_result asb_ws_recv(asb_ws *ws, int timeout_ms, asb_ws_message *msg, asb_error *err) {
    int64_t until = timeout_ms > 0 ? asb__now_ms() + timeout_ms : 0;
    if (!ws || !msg) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "websocket: NULL argument");
    msg->opcode = ASB_WS_BINARY;
    msg->data.ptr = "";
    msg->data.len = 0;
    for (;;) {
        int op = 0, k;
        long n;
        asb_str pl;
        if (ws->close_code)
            return asb__fail(err, ASB_ERR_CLOSED, "websocket: the server closed the connection "
                             "(code %d%s%s)", ws->close_code, ws->close_reason[0] ? ": " : "",
                             ws->close_reason);
        k = asb__ws_next(&ws->rd, &op, &pl);
        if (k < 0) {
            asb__ws_send_close(ws, ws->rd.close_code, ws->rd.why, strlen(ws->rd.why));
            ws->failed = 1;
            return asb__fail(err, ws->rd.close_code == 1009 ? ASB_ERR_TOO_LARGE : ASB_ERR_WEBSOCKET,
                             "websocket: %s (closed with %d)", ws->rd.why, ws->rd.close_code);
        }
        if (k > 0) {
            if (op == ASB_WS_TEXT || op == ASB_WS_BINARY) {
                msg->opcode = (asb_ws_opcode)op;
                msg->data = pl;
                return ASB_OK;
            }
            asb__ws_control(ws, op, pl);
            continue;
        }
        if (ws->failed) return asb__fail(err, ASB_ERR_RECV, "websocket: the connection failed");
        n = asb__ws_read_some(ws);
        if (n > 0) continue;
        if (n < 0) {
            ws->failed = 1;
            return asb__fail(err, ASB_ERR_RECV, "websocket: the connection %s without a close frame",
                             n == -1 ? "ended" : "failed");
        }
        k = asb__ws_wait(ws, until);
        if (k == 0) return asb__fail(err, ASB_ERR_TIMEOUT, "websocket: no message within %d ms",
                                     timeout_ms);
        if (k < 0) return asb__fail(err, ASB_ERR_RECV, "websocket: poll failed: %s", strerror(errno));
    }
}

ASB_API asb_result asb_ws_close(asb_ws *ws, int code, const char *reason, asb_error *err) {
    size_t rl = reason ? strlen(reason) : 0;
    int64_t until;
    asb_result r;
    if (!ws) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "websocket: NULL handle");
    if (code == 0) code = 1000;
    if (!asb__ws_close_code_ok((unsigned)code) || code == 1004 || rl > 123 ||
        (rl && !asb__ws_utf8_ok((const unsigned char *)reason, rl)))
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "websocket: close code %d or its reason is not one a client may send",
                         code);
    r = asb__ws_send_close(ws, code, reason, rl);
    if (r != ASB_OK) return asb__fail(err, r, "websocket: sending the close failed");
    until = asb__now_ms() + 1000; /* the peer's close, past any data in flight */
    while (!ws->close_code && !ws->failed) {
        int op = 0, k;
        long n;
        asb_str pl;
        k = asb__ws_next(&ws->rd, &op, &pl);
        if (k < 0) {
            ws->failed = 1;
            break;
        }
        if (k > 0) {
            if (op >= 8) asb__ws_control(ws, op, pl);
            continue;
        }
        n = asb__ws_read_some(ws);
        if (n > 0) continue;
        if (n < 0) {
            ws->failed = 1;
            break;
        }
        if (asb__ws_wait(ws, until) <= 0) break;
    }
    return ASB_OK;
}

ASB_API int asb_ws_close_code(const asb_ws *ws) {
    return ws ? ws->close_code : 0;
}

ASB_API const char *asb_ws_protocol(const asb_ws *ws) {
    return ws ? ws->protocol : "";
}

ASB_API void asb_ws_free(asb_ws *ws) {
    asb_kube_client *kc;
    if (!ws) return;
    kc = ws->kc;
    if (ws->c) {
        if (!ws->close_sent && !ws->failed) {
            ws->write_timeout_ms = 100; /* best effort, never a wait on the peer */
            asb__ws_send_close(ws, 1000, NULL, 0);
        }
        asb__conn_close(ws->http->http, ws->c);
    }
    asb__kube_http_release(kc, ws->http);
    asb__ws_reader_free(&ws->rd);
    asb_buf_free(&ws->out);
    kc->alloc.free_fn(ws, kc->alloc.user_data);
}

/* A header value holds a comma-separated token (case-insensitive). */
static int asb__header_has_token(const char *v, const char *tok) {
    size_t tl = strlen(tok);
    while (v && *v) {
        const char *e = strchr(v, ',');
        const char *a = v, *b = e ? e : v + strlen(v);
        while (a < b && (*a == ' ' || *a == '\t')) a++;
        while (b > a && (b[-1] == ' ' || b[-1] == '\t')) b--;
        if ((size_t)(b - a) == tl && asb__ieq(a, tl, tok)) return 1;
        v = e ? e + 1 : NULL;
    }
    return 0;
}

/* One upgrade attempt on a fresh connection. On 101, *c is the
   connection (its leftover bytes moved into the reader); otherwise the
   answer's status and body are in resp. */
static asb_result asb__ws_upgrade(asb_ws *ws, asb_http_client *cl, const asb_url *u,
                                  const char *host, const char *path, const asb_ws_desc *d,
                                  const asb_buf *auth, int64_t deadline,
                                  asb_http_response *resp, asb_error *err) {
    unsigned char nonce[16];
    char key[32], accept[29];
    asb_buf head, kb;
    asb__conn *c = NULL;
    asb__http_parser hp;
    asb__sink_ctx sc;
    asb_http_request dummy;
    char pkey[ASB__POOL_KEY_SIZE], tmp[32];
    asb_result r;
    memset(resp, 0, sizeof *resp);
    resp->alloc_ = cl->alloc;
    asb_buf_init(&resp->body, &cl->alloc);
    if (asb__random_bytes(nonce, sizeof nonce) != ASB_OK)
        return asb__fail(err, ASB_ERR_IO, "websocket: no random bytes for the key");
    asb_buf_init(&kb, &cl->alloc);
    if (asb_base64_encode(nonce, sizeof nonce, &kb) != ASB_OK || kb.len >= sizeof key) {
        asb_buf_free(&kb);
        return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "websocket: out of memory");
    }
    memcpy(key, kb.ptr, kb.len + 1);
    asb_buf_free(&kb);
    asb__ws_accept_for(key, accept);
    asb_buf_init(&head, &cl->alloc);
    head.wipe = 1; /* Authorization */
    r = ASB_OK;
#define ASB__WSPUT(s) do { if (r == ASB_OK) r = asb_buf_append(&head, (s), strlen(s)); } while (0)
    ASB__WSPUT("GET ");
    ASB__WSPUT(path);
    ASB__WSPUT(" HTTP/1.1\r\nHost: ");
    if (u->host_is_ip == 6) ASB__WSPUT("[");
    ASB__WSPUT(host);
    if (u->host_is_ip == 6) ASB__WSPUT("]");
    if (u->port != (u->is_https ? 443 : 80)) {
        snprintf(tmp, sizeof tmp, ":%d", u->port);
        ASB__WSPUT(tmp);
    }
    ASB__WSPUT("\r\nUser-Agent: ");
    ASB__WSPUT(cl->user_agent);
    ASB__WSPUT("\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
               "Sec-WebSocket-Key: ");
    ASB__WSPUT(key);
    ASB__WSPUT("\r\n");
    if (d->protocol) {
        ASB__WSPUT("Sec-WebSocket-Protocol: ");
        ASB__WSPUT(d->protocol);
        ASB__WSPUT("\r\n");
    }
    if (auth->len) {
        ASB__WSPUT("Authorization: ");
        ASB__WSPUT(auth->ptr);
        ASB__WSPUT("\r\n");
    }
    ASB__WSPUT("\r\n");
#undef ASB__WSPUT
    if (r != ASB_OK) {
        asb_buf_free(&head);
        return asb__fail(err, r, "websocket: out of memory");
    }
    snprintf(pkey, sizeof pkey, "ws:%s:%d", host, u->port); /* never pooled */
    r = asb__conn_open(cl, u, host, pkey, deadline, d->cancel, &c, err);
    if (r == ASB_OK) {
        c->deadline = deadline;
        r = asb__conn_write(c, head.ptr, head.len);
        if (r != ASB_OK)
            asb__fail(err, r, "websocket: sending the upgrade request failed (%s)",
                      asb_result_str(r));
    }
    asb_buf_free(&head); /* wiped */
    if (r != ASB_OK) {
        asb__conn_close(cl, c);
        return r;
    }
    memset(&dummy, 0, sizeof dummy);
    asb__hp_init(&hp, 0, cl->max_head, cl->max_headers, &cl->alloc);
    memset(&sc, 0, sizeof sc);
    sc.hp = &hp;
    sc.resp = resp;
    sc.req = &dummy;
    sc.cap = 65536;
    hp.sink = asb__sink;
    hp.sink_ctx = &sc;
    for (;;) {
        long n;
        size_t used = 0;
        if (c->rpos < c->rlen) {
            r = asb__hp_feed(&hp, c->rbuf + c->rpos, c->rlen - c->rpos, &used);
            c->rpos += used;
            if (r != ASB_OK || hp.state == ASB__HP_DONE) break;
        }
        c->rpos = c->rlen = 0;
        n = asb__conn_read(c, c->rbuf, sizeof c->rbuf);
        if (n > 0) {
            c->rlen = (size_t)n;
            continue;
        }
        r = n == 0 ? asb__hp_eof(&hp) : (asb_result)n;
        break;
    }
    if (r == ASB_OK && hp.state == ASB__HP_DONE) {
        resp->status = hp.status;
        r = asb__resp_take_head(resp, &hp);
    } else if (r != ASB_OK) {
        asb__fail(err, r == ASB_ERR_TIMEOUT || r == ASB_ERR_CANCELLED ? r : ASB_ERR_WEBSOCKET,
                  "websocket: GET %.*s: %s", (int)strcspn(path, "?"), path,
                  hp.error ? hp.error
                  : r == ASB_ERR_TIMEOUT ? "timed out waiting for the upgrade answer"
                  : r == ASB_ERR_CANCELLED ? "cancelled"
                                           : "the connection ended before the upgrade answer");
        r = r == ASB_ERR_TIMEOUT || r == ASB_ERR_CANCELLED ? r : ASB_ERR_WEBSOCKET;
    }
    asb__hp_free(&hp);
    if (r != ASB_OK || resp->status != 101) {
        asb__conn_close(cl, c);
        return r;
    }
    {
        const char *up = asb_http_response_header(resp, "Upgrade");
        const char *co = asb_http_response_header(resp, "Connection");
        const char *ac = asb_http_response_header(resp, "Sec-WebSocket-Accept");
        const char *pr = asb_http_response_header(resp, "Sec-WebSocket-Protocol");
        const char *why = NULL;
        if (!up || !asb__ieq(up, strlen(up), "websocket"))
            why = "its Upgrade header is not \"websocket\"";
        else if (!co || !asb__header_has_token(co, "upgrade"))
            why = "its Connection header lacks \"Upgrade\"";
        else if (!ac || strcmp(ac, accept) != 0)
            why = "Sec-WebSocket-Accept does not match the key sent";
        else if (pr && *pr && (!d->protocol || !asb__header_has_token(d->protocol, pr)))
            why = "it chose a protocol that was not asked for";
        else if (asb_http_response_header(resp, "Sec-WebSocket-Extensions"))
            why = "it chose an extension that was not asked for";
        if (why) {
            asb__conn_close(cl, c);
            return asb__fail(err, ASB_ERR_WEBSOCKET, "websocket: GET %.*s: the 101 answer is "
                             "not a valid WebSocket handshake: %s",
                             (int)strcspn(path, "?"), path, why);
        }
        snprintf(ws->protocol, sizeof ws->protocol, "%s", pr ? pr : "");
    }
    /* the bytes after the head are the server's first frames */
    if (c->rpos < c->rlen &&
        asb_buf_append(&ws->rd.in, c->rbuf + c->rpos, c->rlen - c->rpos) != ASB_OK) {
        asb__conn_close(cl, c);
        return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "websocket: out of memory");
    }
    c->rpos = c->rlen = 0;
    c->deadline = 0;
    c->cancel = NULL;
#if ASB_TLS
    if (c->use_tls) mbedtls_ssl_set_bio(&c->ssl, c, asb__ws_bio_send, asb__ws_bio_recv, NULL);
#endif
    ws->c = c;
    return ASB_OK;
}

ASB_API asb_result asb_kube_ws_connect(asb_kube_client *kc, const asb_ws_desc *desc,
                                       asb_ws **out, asb_error *err) {
    asb_ws_desc d;
    asb_ws *ws;
    asb_buf url, auth;
    asb_url u;
    char host[260];
    asb_result r = ASB_OK;
    int attempt;
    int64_t deadline;
    const char *s;
    if (!out) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "websocket: NULL out");
    *out = NULL;
    if (!kc || !desc || !desc->path || desc->path[0] != '/')
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "websocket: a path must start with '/'");
    d = *desc;
    if (!d.max_message_bytes) d.max_message_bytes = 4u << 20;
    if (d.timeout_ms <= 0) d.timeout_ms = 30000;
    if (d.write_timeout_ms <= 0) d.write_timeout_ms = 30000;
    for (s = d.path; *s; s++)
        if ((unsigned char)*s <= 0x20 || *s == 0x7f)
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                             "websocket: the path holds a space or control byte");
    for (s = d.protocol; s && *s; s++)
        if (!asb__is_tchar((unsigned char)*s) && *s != ',' && *s != ' ')
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                             "websocket: the protocol list holds a byte a token may not");
    ws = (asb_ws *)kc->alloc.alloc_fn(sizeof *ws, kc->alloc.user_data);
    if (!ws) return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "websocket: out of memory");
    memset(ws, 0, sizeof *ws);
    ws->kc = kc;
    ws->write_timeout_ms = d.write_timeout_ms;
    ws->rnd_pos = sizeof ws->rnd; /* filled at the first frame */
    asb__ws_reader_init(&ws->rd, &kc->alloc, d.max_message_bytes);
    asb_buf_init(&ws->out, &kc->alloc);
    asb_buf_init(&url, &kc->alloc);
    asb_buf_init(&auth, &kc->alloc);
    auth.wipe = 1;
    if (asb_buf_append(&url, kc->base, strlen(kc->base)) != ASB_OK ||
        asb_buf_append(&url, d.path, strlen(d.path)) != ASB_OK) {
        r = asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "websocket: out of memory");
        goto done;
    }
    r = asb_url_parse(url.ptr, url.len, &u, err);
    if (r != ASB_OK) goto done;
    snprintf(host, sizeof host, "%.*s", (int)u.host.len, u.host.ptr);
    deadline = asb__now_ms() + d.timeout_ms;
    for (attempt = 0; attempt < 2; attempt++) {
        unsigned gen = 0;
        asb__kube_http *http = NULL;
        asb_http_response resp;
        char target[4096];
        snprintf(target, sizeof target, "%.*s", (int)u.target.len, u.target.ptr);
        r = asb__kube_auth(kc, &auth, &gen, &http, err);
        if (r != ASB_OK) break;
        r = asb__ws_upgrade(ws, http->http, &u, host, target[0] ? target : "/", &d, &auth,
                            deadline, &resp, err);
        if (r == ASB_OK && resp.status == 101) {
            ws->http = http; /* the connection's TLS configuration: kept */
            asb_http_response_free(&resp);
            break;
        }
        asb__kube_http_release(kc, http);
        if (r == ASB_OK && resp.status == 401 && kc->cfg.exec && attempt == 0) {
            pthread_mutex_lock(&kc->lock);
            if (kc->exec_gen == gen) kc->exec_have = 0;
            pthread_mutex_unlock(&kc->lock);
            asb_http_response_free(&resp);
            continue;
        }
        if (r == ASB_OK && resp.status >= 400) {
            r = asb__kube_status_error("GET", d.path, resp.status, &resp.body, err);
            asb__error_headers(err, &resp);
        } else if (r == ASB_OK) {
            char ex[120];
            asb__quote(ex, sizeof ex, resp.body.ptr ? resp.body.ptr : "", resp.body.len, 80);
            r = asb__fail(err, ASB_ERR_WEBSOCKET,
                          "websocket: GET %.*s: the server answered %d instead of switching "
                          "protocols (a proxy in front of the apiserver that does not pass "
                          "WebSocket upgrades?)%s%s",
                          (int)strcspn(d.path, "?"), d.path, resp.status, ex[0] ? ": " : "", ex);
            if (err) err->http_status = resp.status;
        }
        asb_http_response_free(&resp);
        break;
    }
    if (r != ASB_OK && auth.len) {
        const char *sp = (const char *)memchr(auth.ptr, ' ', auth.len);
        if (sp) asb__mask_error(err, sp + 1);
    }
done:
    asb_buf_free(&auth);
    asb_buf_free(&url);
    if (r != ASB_OK) {
        asb_ws_free(ws);
        return r;
    }
    *out = ws;
    return ASB_OK;
}

/* >>portforward ============================================================
   kubectl port-forward without kubectl: a Service resolved to a Running,
   Ready pod and its target port as kubectl does, then one WebSocket per
   connection with the v4.channel.k8s.io protocol, which the apiserver
   passes through to the kubelet (kwok here) unchanged. Per port i the
   data channel is 2i and the error channel 2i+1; each message starts
   with its channel byte; the server's first message on each channel is
   the port as 2 bytes little-endian. The error channel's text ("error
   forwarding port P to pod ...") is the stream's error.

   Not spoken: the SPDY/3.1 protocols (plain, or tunnelled in a WebSocket
   as "SPDY/3.1+portforward.k8s.io", which a 1.31+ apiserver translates).
   Both need SPDY framing with zlib-compressed headers; v4 reaches the
   same kubelet code on every apiserver from 1.4 on.

   Each dial hands back one end of a socketpair; a relay thread per
   stream moves bytes between the other end and the WebSocket. A
   socketpair rather than a listening port: nothing another local user
   could connect to (see >>tunnel on why kubectl's listener is avoided
   the same way). */

/* Service and pod lookups. ---------------------------------------------------- */

/* A pod name as the path needs it: a DNS subdomain (the server's answer
   is checked too; it goes into a URL). */
static int asb__pf_name_ok(const char *s) {
    size_t n = strlen(s), i;
    if (n == 0 || n > 253) return 0;
    for (i = 0; i < n; i++)
        if (!asb__is_lower_alnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '.') return 0;
    return 1;
}

static int asb__pod_ready(const asb_json_doc *doc, int pod, int64_t *since) {
    int conds = asb_json_find(doc, pod, "status.conditions");
    asb_json_iter it = asb_json_iter_begin(doc, conds);
    int v;
    while (asb_json_iter_next(doc, &it, NULL, &v)) {
        if (asb_json_string_eq(doc, asb_json_member(doc, v, "type", 4), "Ready", 5) &&
            asb_json_string_eq(doc, asb_json_member(doc, v, "status", 6), "True", 4)) {
            char ts[64];
            *since = INT64_MAX;
            if (asb_json_get_string(doc, asb_json_member(doc, v, "lastTransitionTime", 18), ts,
                                    sizeof ts, NULL) == ASB_OK)
                asb_time_parse_rfc3339(ts, strlen(ts), since, NULL);
            return 1;
        }
    }
    return 0;
}

static int asb__port_number(const char *s, int *out) {
    long v = 0;
    const char *p = s;
    if (!s || !*s) return 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9') return 0;
        v = v * 10 + (*p - '0');
        if (v > 65535) return 0;
    }
    if (v < 1) return 0;
    *out = (int)v;
    return 1;
}

ASB_API asb_result asb_portforward_resolve(asb_kube_client *kc, const char *ns,
                                           const char *service, const char *port,
                                           asb_portforward_target *out, asb_error *err) {
    asb_buf path, svc, pods, sel, tname;
    asb_json_doc sd, pd;
    int have_sd = 0, have_pd = 0, num = 0, want_num, tport = 0, sports, found = -1, best = -1;
    int count = 0, k, v;
    int64_t best_since = INT64_MAX;
    char why[200] = "";
    asb_result r;
    asb_json_iter it;
    if (!kc || !service || !port || !out)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "portforward: service and port needed");
    memset(out, 0, sizeof *out);
    if (!ns) ns = kc->cfg.default_namespace ? kc->cfg.default_namespace : "default";
    if (asb_dns_label_validate(ns, strlen(ns), err) != ASB_OK) return ASB_ERR_INVALID_ARGUMENT;
    if (asb_dns_label_validate(service, strlen(service), err) != ASB_OK)
        return ASB_ERR_INVALID_ARGUMENT;
    want_num = asb__port_number(port, &num);
    asb_buf_init(&path, &kc->alloc);
    asb_buf_init(&svc, &kc->alloc);
    asb_buf_init(&pods, &kc->alloc);
    asb_buf_init(&sel, &kc->alloc);
    asb_buf_init(&tname, &kc->alloc);
    r = asb_buf_append(&path, "/api/v1/namespaces/", 19);
    if (r == ASB_OK) r = asb_buf_append(&path, ns, strlen(ns));
    if (r == ASB_OK) r = asb_buf_append(&path, "/services/", 10);
    if (r == ASB_OK) r = asb_buf_append(&path, service, strlen(service));
    if (r != ASB_OK) {
        r = asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "portforward: out of memory");
        goto done;
    }
    r = asb_kube_request(kc, "GET", path.ptr, NULL, NULL, 0, &svc, err);
    if (r != ASB_OK) goto done;
    r = asb_json_doc_parse(&sd, svc.ptr ? svc.ptr : "", svc.len, &kc->alloc, err);
    if (r != ASB_OK) goto done;
    have_sd = 1;
    /* the service port: by number or by name */
    sports = asb_json_find(&sd, 0, "spec.ports");
    it = asb_json_iter_begin(&sd, sports);
    while (asb_json_iter_next(&sd, &it, NULL, &v)) {
        int64_t pn = 0;
        int tp = asb_json_member(&sd, v, "targetPort", 10);
        if (want_num ? asb_json_get_int64(&sd, asb_json_member(&sd, v, "port", 4), &pn) == ASB_OK &&
                           pn == num
                     : asb_json_string_eq(&sd, asb_json_member(&sd, v, "name", 4), port,
                                          strlen(port))) {
            int64_t t = 0;
            found = v;
            if (tp < 0) {
                asb_json_get_int64(&sd, asb_json_member(&sd, v, "port", 4), &t);
                tport = (int)t;
            } else if (asb_json_get_int64(&sd, tp, &t) == ASB_OK) {
                tport = (int)t;
            } else if (asb_json_append_string(&sd, tp, &tname) != ASB_OK) {
                found = -1;
            } else if (asb__port_number(tname.ptr, &tport)) {
                tname.len = 0; /* "8080" as a string is the number */
            }
            break;
        }
    }
    if (found < 0) {
        r = asb__fail(err, ASB_ERR_PORT_FORWARD,
                      "portforward: service %s/%s has no port %s", ns, service, port);
        goto done;
    }
    /* the selector, as a labelSelector query */
    it = asb_json_iter_begin(&sd, asb_json_find(&sd, 0, "spec.selector"));
    while (r == ASB_OK && asb_json_iter_next(&sd, &it, &k, &v)) {
        asb_buf kv;
        asb_buf_init(&kv, &kc->alloc);
        r = asb_json_append_string(&sd, k, &kv);
        if (r == ASB_OK) r = asb_buf_append(&kv, "=", 1);
        if (r == ASB_OK) r = asb_json_append_string(&sd, v, &kv);
        if (r == ASB_OK && sel.len) r = asb_buf_append(&sel, ",", 1);
        if (r == ASB_OK) r = asb_buf_append(&sel, kv.ptr, kv.len);
        asb_buf_free(&kv);
    }
    if (r != ASB_OK) {
        r = asb__fail(err, ASB_ERR_PORT_FORWARD, "portforward: service %s/%s: unreadable "
                      "selector", ns, service);
        goto done;
    }
    if (!sel.len) {
        r = asb__fail(err, ASB_ERR_PORT_FORWARD,
                      "portforward: service %s/%s has no selector, so no pod to forward to "
                      "(kubectl refuses it too)", ns, service);
        goto done;
    }
    path.len = 0;
    r = asb_buf_append(&path, "/api/v1/namespaces/", 19);
    if (r == ASB_OK) r = asb_buf_append(&path, ns, strlen(ns));
    if (r == ASB_OK) r = asb_buf_append(&path, "/pods?labelSelector=", 20);
    if (r == ASB_OK) r = asb_percent_encode_segment(sel.ptr, sel.len, &path);
    if (r != ASB_OK) {
        r = asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "portforward: out of memory");
        goto done;
    }
    r = asb_kube_request(kc, "GET", path.ptr, NULL, NULL, 0, &pods, err);
    if (r != ASB_OK) goto done;
    r = asb_json_doc_parse(&pd, pods.ptr ? pods.ptr : "", pods.len, &kc->alloc, err);
    if (r != ASB_OK) goto done;
    have_pd = 1;
    it = asb_json_iter_begin(&pd, asb_json_find(&pd, 0, "items"));
    while (asb_json_iter_next(&pd, &it, NULL, &v)) {
        int64_t since = 0;
        char name[254];
        count++;
        if (asb_json_get_string(&pd, asb_json_find(&pd, v, "metadata.name"), name, sizeof name,
                                NULL) != ASB_OK ||
            !asb__pf_name_ok(name))
            continue;
        if (asb_json_find(&pd, v, "metadata.deletionTimestamp") >= 0 &&
            !asb_json_is_null(&pd, asb_json_find(&pd, v, "metadata.deletionTimestamp"))) {
            if (!why[0]) snprintf(why, sizeof why, "; pod %.100s is being deleted", name);
            continue;
        }
        if (!asb_json_string_eq(&pd, asb_json_find(&pd, v, "status.phase"), "Running", 7)) {
            char ph[32] = "";
            asb_json_get_string(&pd, asb_json_find(&pd, v, "status.phase"), ph, sizeof ph, NULL);
            asb__scrub_controls(ph);
            if (!why[0]) snprintf(why, sizeof why, "; pod %.100s is %s", name, ph[0] ? ph : "without a phase");
            continue;
        }
        if (!asb__pod_ready(&pd, v, &since)) {
            if (!why[0]) snprintf(why, sizeof why, "; pod %.100s is Running but not Ready", name);
            continue;
        }
        if (best < 0 || since < best_since ||
            (since == best_since && strcmp(name, out->pod) < 0)) {
            best = v;
            best_since = since;
            memcpy(out->pod, name, sizeof out->pod);
        }
    }
    if (best < 0) {
        char sq[120];
        asb__quote(sq, sizeof sq, sel.ptr, sel.len, 100);
        r = asb__fail(err, ASB_ERR_PORT_FORWARD,
                      "portforward: no Running and Ready pod behind service %s/%s (selector %s: "
                      "%d pod%s%s)", ns, service, sq, count, count == 1 ? "" : "s",
                      count ? why : "");
        goto done;
    }
    if (tname.len) { /* a named target port: the chosen pod's container ports */
        int cs = asb_json_find(&pd, best, "spec.containers");
        asb_json_iter ci = asb_json_iter_begin(&pd, cs);
        int cv;
        tport = 0;
        while (!tport && asb_json_iter_next(&pd, &ci, NULL, &cv)) {
            asb_json_iter pi = asb_json_iter_begin(&pd, asb_json_member(&pd, cv, "ports", 5));
            int pv;
            while (asb_json_iter_next(&pd, &pi, NULL, &pv)) {
                int64_t cp = 0;
                if (asb_json_string_eq(&pd, asb_json_member(&pd, pv, "name", 4), tname.ptr,
                                       tname.len) &&
                    asb_json_get_int64(&pd, asb_json_member(&pd, pv, "containerPort", 13), &cp) ==
                        ASB_OK) {
                    tport = (int)cp;
                    break;
                }
            }
        }
        if (!tport) {
            char tq[80];
            asb__quote(tq, sizeof tq, tname.ptr, tname.len, 60);
            r = asb__fail(err, ASB_ERR_PORT_FORWARD,
                          "portforward: service %s/%s port %s targets the named port \"%s\", "
                          "which no container of pod %s declares", ns, service, port, tq,
                          out->pod);
            goto done;
        }
    }
    if (tport < 1 || tport > 65535) {
        r = asb__fail(err, ASB_ERR_PORT_FORWARD, "portforward: service %s/%s port %s has no "
                      "usable target port", ns, service, port);
        goto done;
    }
    out->port = tport;
done:
    if (have_sd) asb_json_doc_free(&sd);
    if (have_pd) asb_json_doc_free(&pd);
    asb_buf_free(&path);
    asb_buf_free(&svc);
    asb_buf_free(&pods);
    asb_buf_free(&sel);
    asb_buf_free(&tname);
    if (r != ASB_OK) out->pod[0] = '\0';
    return r;
}

/* The forwarder and its streams. ------------------------------------------------ */

typedef struct asb__pf_stream {
    struct asb_portforward *pf;
    asb_ws *ws;
    int sp;                /* our end of the socketpair */
    char pod[254];         /* where it leads, for messages */
    int port;
    pthread_t thread;
    int done;              /* the relay ended: join it */
    struct asb__pf_stream *next;
} asb__pf_stream;

struct asb_portforward {
    asb_kube_client *kc;
    asb_allocator alloc;
    char ns[64], service[64], pod[254], port[64];
    int timeout_ms;
    asb_logger log;
    pthread_mutex_t lock;  /* everything below */
    asb_portforward_target cached; /* pod[0] == 0: resolve at the next dial */
    asb__pf_stream *streams;
    unsigned long opened, live;
    int has_error;
    asb_error last_error;
};

ASB_API asb_result asb_portforward_create(asb_kube_client *kc, const asb_portforward_desc *desc,
                                          asb_portforward **out, asb_error *err) {
    asb_portforward *pf;
    int num = 0;
    const char *ns;
    if (!out) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "portforward: NULL out");
    *out = NULL;
    if (!kc || !desc || !desc->port || !*desc->port || !desc->service == !desc->pod)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "portforward: give a port and either a service or a pod");
    ns = desc->ns ? desc->ns : kc->cfg.default_namespace ? kc->cfg.default_namespace : "default";
    if (asb_dns_label_validate(ns, strlen(ns), err) != ASB_OK) return ASB_ERR_INVALID_ARGUMENT;
    if (desc->pod && !asb__pf_name_ok(desc->pod))
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "portforward: a pod name holds only lowercase letters, digits, '-', '.'");
    if (desc->pod && !asb__port_number(desc->port, &num))
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "portforward: a pod's port must be a number from 1 to 65535");
    if ((desc->service && strlen(desc->service) >= 64) || (desc->pod && strlen(desc->pod) >= 254) ||
        strlen(desc->port) >= 64)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "portforward: a name is too long");
    pf = (asb_portforward *)kc->alloc.alloc_fn(sizeof *pf, kc->alloc.user_data);
    if (!pf) return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "portforward: out of memory");
    memset(pf, 0, sizeof *pf);
    pf->kc = kc;
    pf->alloc = kc->alloc;
    snprintf(pf->ns, sizeof pf->ns, "%s", ns);
    if (desc->service) snprintf(pf->service, sizeof pf->service, "%s", desc->service);
    if (desc->pod) {
        snprintf(pf->pod, sizeof pf->pod, "%s", desc->pod);
        snprintf(pf->cached.pod, sizeof pf->cached.pod, "%s", desc->pod);
        pf->cached.port = num;
    }
    snprintf(pf->port, sizeof pf->port, "%s", desc->port);
    pf->timeout_ms = desc->timeout_ms > 0 ? desc->timeout_ms : 30000;
    if (desc->log) pf->log = *desc->log;
    pthread_mutex_init(&pf->lock, NULL);
    *out = pf;
    return ASB_OK;
}

static void asb__pf_note_error(asb_portforward *pf, const asb_error *e) {
    pthread_mutex_lock(&pf->lock);
    pf->last_error = *e;
    pf->has_error = 1;
    if (pf->service[0]) pf->cached.pod[0] = '\0'; /* the next dial resolves again */
    pthread_mutex_unlock(&pf->lock);
}

/* Local bytes per message. The kubelet side (x/net/websocket) reads each
   message whole into a buffer it grows by doubling, so very large
   messages cost it more than they save us; 16-64 KiB measured alike. */
#define ASB__PF_CHUNK 32768

/* Moves bytes both ways until either side ends. The pod's bytes wait in
   `pend` while the socket is full (then the WebSocket is not read: the
   apiserver's TCP window pushes back); the local side's bytes go out as
   they come, one message each. */
static void *asb__pf_relay(void *arg) {
    asb__pf_stream *st = (asb__pf_stream *)arg;
    asb_portforward *pf = st->pf;
    asb_ws *ws = st->ws;
    char *buf = (char *)pf->alloc.alloc_fn(ASB__PF_CHUNK, pf->alloc.user_data);
    asb_buf pend, etext;
    size_t pend_pos = 0;
    int local_open = 1, ws_ended = 0; /* ws_ended: the server's side closed;
                                         what it sent before is still parsed */
    int64_t last_io = asb__now_ms(); /* the last data either way */
    asb_error e;
    memset(&e, 0, sizeof e);
    asb_buf_init(&pend, &pf->alloc);
    asb_buf_init(&etext, &pf->alloc);
    while (buf) {
        struct pollfd pfd[2];
        int k, op = 0, n_pfd = 1;
        asb_str pl;
        /* the messages already buffered first */
        while (pend.len == pend_pos && (k = asb__ws_next(&ws->rd, &op, &pl)) != 0) {
            if (k < 0) {
                asb__ws_send_close(ws, ws->rd.close_code, ws->rd.why, strlen(ws->rd.why));
                asb__fail(&e, ASB_ERR_WEBSOCKET, "port-forward to pod %s: %s", st->pod,
                          ws->rd.why);
                goto out;
            }
            if (op == ASB_WS_BINARY && pl.len >= 1 && pl.ptr[0] == 0) {
                /* to the local side at once; what it does not take waits */
                size_t done = 0;
                last_io = asb__now_ms();
                pend.len = pend_pos = 0;
                while (done < pl.len - 1) {
#ifdef MSG_NOSIGNAL
                    ssize_t w = send(st->sp, pl.ptr + 1 + done, pl.len - 1 - done, MSG_NOSIGNAL);
#else
                    ssize_t w = send(st->sp, pl.ptr + 1 + done, pl.len - 1 - done, 0);
#endif
                    if (w > 0) {
                        done += (size_t)w;
                        continue;
                    }
                    if (w < 0 && errno == EINTR) continue;
                    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) goto out;
                    break;
                }
                if (done < pl.len - 1 &&
                    asb_buf_append(&pend, pl.ptr + 1 + done, pl.len - 1 - done) != ASB_OK)
                    goto out;
            } else if (op == ASB_WS_BINARY && pl.len >= 1 && pl.ptr[0] == 1) {
                size_t room = etext.len < 400 ? 400 - etext.len : 0;
                size_t take = pl.len - 1 < room ? pl.len - 1 : room;
                if (take) asb_buf_append(&etext, pl.ptr + 1, take);
            } else if (op >= 8) {
                if (asb__ws_control(ws, op, pl)) goto out;
            }
        }
        if (ws_ended && pend.len == pend_pos) goto lost; /* all of it handed on */
        if (pend.len > pend_pos) { /* to the local side, as far as it takes */
#ifdef MSG_NOSIGNAL
            ssize_t w = send(st->sp, pend.ptr + pend_pos, pend.len - pend_pos, MSG_NOSIGNAL);
#else
            ssize_t w = send(st->sp, pend.ptr + pend_pos, pend.len - pend_pos, 0);
#endif
            if (w > 0) pend_pos += (size_t)w;
            else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
                goto out; /* the local side is gone */
            if (pend_pos == pend.len) pend.len = pend_pos = 0;
        }
        pfd[0].fd = st->sp;
        pfd[0].events = (short)((local_open ? POLLIN : 0) | (pend.len > pend_pos ? POLLOUT : 0));
        pfd[0].revents = 0;
        if (pend.len == pend_pos && !ws_ended) {
            if (asb__ws_has_buffered(ws)) {
                if (asb__ws_read_some(ws) < 0) ws_ended = 1;
                continue;
            }
            pfd[1].fd = ws->c->fd;
            pfd[1].events = POLLIN;
            pfd[1].revents = 0;
            n_pfd = 2;
        }
        k = poll(pfd, (nfds_t)n_pfd, -1);
        if (k < 0) {
            if (errno == EINTR) continue;
            goto out;
        }
        if (n_pfd == 2 && pfd[1].revents) {
            /* what is there, a few reads' worth, before parsing */
            long n;
            do
                n = asb__ws_read_some(ws);
            while (n > 0 && ws->rd.in.len - ws->rd.pos < ((size_t)256 << 10));
            if (n < 0) ws_ended = 1; /* after the messages before it */
        }
        if (pfd[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t n = recv(st->sp, buf, ASB__PF_CHUNK, 0);
            if (n > 0) {
                static const char chan = 0;
                size_t first = 0;
                int64_t now = asb__now_ms();
                if (now - last_io >= 500 && n > 1) {
                    /* After a pause the pod's end may have closed, and the
                       kubelet's copy loop (kwok's too) only notices on its
                       second write to it: the first byte goes alone, so a
                       dead target fails this request at once (the error
                       channel) instead of swallowing it until a timeout. */
                    first = 1;
                    if (asb__ws_send_frame(ws, ASB_WS_BINARY, &chan, 1, buf, 1) != ASB_OK)
                        goto lost;
                }
                last_io = now;
                if (asb__ws_send_frame(ws, ASB_WS_BINARY, &chan, 1, buf + first,
                                       (size_t)n - first) != ASB_OK)
                    goto lost;
            } else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
                /* the local side closed: v4 has no half-close, the stream ends */
                local_open = 0;
                goto out;
            }
        }
    }
lost:
    if (!etext.len)
        asb__fail(&e, ASB_ERR_PORT_FORWARD, "port-forward to pod %s port %d: the connection to "
                  "the apiserver dropped", st->pod, st->port);
out:
    if (etext.len) {
        char q[420];
        asb__quote(q, sizeof q, etext.ptr, etext.len, 400);
        asb__fail(&e, ASB_ERR_PORT_FORWARD, "port-forward: %s", q);
    }
    if (e.code && local_open) asb__pf_note_error(pf, &e);
    if (e.code) asb__log(&pf->log, ASB_LOG_WARN, "portforward.stream.failed", "%s", e.message);
    shutdown(st->sp, SHUT_RDWR); /* the local side sees the end */
    if (!ws->close_sent && !ws->failed) {
        ws->write_timeout_ms = 1000;
        asb__ws_send_close(ws, 1000, NULL, 0);
    }
    asb_buf_free(&pend);
    asb_buf_free(&etext);
    if (buf) pf->alloc.free_fn(buf, pf->alloc.user_data);
    pthread_mutex_lock(&pf->lock);
    st->done = 1;
    pf->live--;
    pthread_mutex_unlock(&pf->lock);
    return NULL;
}

/* Joins and frees finished streams (called with the lock released). */
static void asb__pf_reap(asb_portforward *pf, int all) {
    for (;;) {
        asb__pf_stream **pp, *st = NULL;
        pthread_mutex_lock(&pf->lock);
        for (pp = &pf->streams; *pp; pp = &(*pp)->next)
            if ((*pp)->done || all) {
                st = *pp;
                *pp = st->next;
                break;
            }
        pthread_mutex_unlock(&pf->lock);
        if (!st) return;
        if (all) shutdown(st->sp, SHUT_RDWR);
        pthread_join(st->thread, NULL);
        close(st->sp);
        asb_ws_free(st->ws);
        pf->alloc.free_fn(st, pf->alloc.user_data);
    }
}

/* Waits for the server's first message on a channel: the port, 2 bytes
   little-endian. The data channel's comes first, then the error one's,
   both before any data. */
static asb_result asb__pf_expect_port(asb_ws *ws, int channel, int port, const char *pod,
                                      int timeout_ms, asb_error *err) {
    asb_ws_message m;
    asb_result r = asb_ws_recv(ws, timeout_ms, &m, err);
    if (r != ASB_OK) {
        if (err) {
            char m2[ASB_ERROR_MESSAGE_SIZE];
            snprintf(m2, sizeof m2, "portforward: pod %.120s port %d: the stream ended before it "
                     "opened: %.300s", pod, port, err->message);
            memcpy(err->message, m2, sizeof m2);
            err->code = ASB_ERR_PORT_FORWARD;
        }
        return ASB_ERR_PORT_FORWARD;
    }
    if (m.opcode != ASB_WS_BINARY || m.data.len != 3 || (unsigned char)m.data.ptr[0] != channel ||
        ((unsigned char)m.data.ptr[1] | (unsigned char)m.data.ptr[2] << 8) != port)
        return asb__fail(err, ASB_ERR_PORT_FORWARD,
                         "portforward: pod %s: the server's first message on channel %d is not "
                         "port %d (is this a v4.channel.k8s.io server?)", pod, channel, port);
    return ASB_OK;
}

ASB_API asb_result asb_portforward_dial(asb_portforward *pf, int *fd, asb_error *err) {
    asb_portforward_target t;
    asb_ws_desc wd;
    asb_ws *ws = NULL;
    asb_result r = ASB_OK;
    asb__pf_stream *st;
    int sv[2], attempt;
    char path[512];
    if (!pf || !fd) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "portforward: NULL argument");
    *fd = -1;
    asb__pf_reap(pf, 0);
    for (attempt = 0; attempt < 2; attempt++) {
        int fresh = 0;
        pthread_mutex_lock(&pf->lock);
        t = pf->cached;
        pthread_mutex_unlock(&pf->lock);
        if (!t.pod[0]) {
            r = asb_portforward_resolve(pf->kc, pf->ns, pf->service, pf->port, &t, err);
            if (r != ASB_OK) return r;
            fresh = 1;
            asb__log(&pf->log, ASB_LOG_DEBUG, "portforward.resolved",
                     "service %s/%s port %s -> pod %s port %d", pf->ns, pf->service, pf->port,
                     t.pod, t.port);
        }
        snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s/portforward?ports=%d", pf->ns,
                 t.pod, t.port);
        memset(&wd, 0, sizeof wd);
        wd.path = path;
        wd.protocol = "v4.channel.k8s.io";
        wd.timeout_ms = pf->timeout_ms;
        wd.max_message_bytes = 1u << 20;
        r = asb_kube_ws_connect(pf->kc, &wd, &ws, err);
        if (r == ASB_OK) {
            r = asb__pf_expect_port(ws, 0, t.port, t.pod, pf->timeout_ms, err);
            if (r == ASB_OK) r = asb__pf_expect_port(ws, 1, t.port, t.pod, pf->timeout_ms, err);
            if (r != ASB_OK) {
                asb_ws_free(ws);
                ws = NULL;
            }
        } else if (err && (r == ASB_ERR_WEBSOCKET ||
                           (r == ASB_ERR_KUBE_API && !err->reason[0]))) {
            /* no upgrade, and no Kubernetes Status saying why: something
               in front of the apiserver that does not pass WebSockets */
            size_t l = strlen(err->message);
            snprintf(err->message + l, sizeof err->message - l,
                     "; the kubectl tunnel (ASB_CONNECT_LOCAL_TUNNEL) speaks SPDY and may get "
                     "through where this does not");
            err->code = r = ASB_ERR_PORT_FORWARD;
        }
        if (r == ASB_OK) break;
        /* a pod that went away: resolve again, once, if it was not just resolved */
        if (!pf->service[0] || fresh || (r != ASB_ERR_NOT_FOUND && r != ASB_ERR_PORT_FORWARD))
            return r;
        pthread_mutex_lock(&pf->lock);
        pf->cached.pod[0] = '\0';
        pthread_mutex_unlock(&pf->lock);
    }
    if (r != ASB_OK) return r;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        asb_ws_free(ws);
        return asb__fail(err, ASB_ERR_IO, "portforward: socketpair: %s", strerror(errno));
    }
    if (asb__set_cloexec_nonblock(sv[0]) != 0 || asb__set_cloexec_nonblock(sv[1]) != 0) {
        close(sv[0]);
        close(sv[1]);
        asb_ws_free(ws);
        return asb__fail(err, ASB_ERR_IO, "portforward: fcntl: %s", strerror(errno));
    }
#ifdef SO_NOSIGPIPE
    {
        int one = 1;
        setsockopt(sv[1], SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one);
    }
#endif
    {
        /* room for a few messages each way, so the relay rarely waits on
           the local side while the apiserver's bytes queue up */
        int sz = 1 << 20, i;
        for (i = 0; i < 2; i++) {
            setsockopt(sv[i], SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
            setsockopt(sv[i], SOL_SOCKET, SO_RCVBUF, &sz, sizeof sz);
        }
    }
    st = (asb__pf_stream *)pf->alloc.alloc_fn(sizeof *st, pf->alloc.user_data);
    if (!st) {
        close(sv[0]);
        close(sv[1]);
        asb_ws_free(ws);
        return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "portforward: out of memory");
    }
    memset(st, 0, sizeof *st);
    st->pf = pf;
    st->ws = ws;
    st->sp = sv[1];
    memcpy(st->pod, t.pod, sizeof st->pod);
    st->port = t.port;
    pthread_mutex_lock(&pf->lock);
    pf->cached = t;
    pf->opened++;
    pf->live++;
    if (pthread_create(&st->thread, NULL, asb__pf_relay, st) != 0) {
        pf->live--;
        pthread_mutex_unlock(&pf->lock);
        close(sv[0]);
        close(sv[1]);
        asb_ws_free(ws);
        pf->alloc.free_fn(st, pf->alloc.user_data);
        return asb__fail(err, ASB_ERR_IO, "portforward: cannot start the relay thread");
    }
    st->next = pf->streams;
    pf->streams = st;
    pthread_mutex_unlock(&pf->lock);
    *fd = sv[0];
    return ASB_OK;
}

ASB_API int asb_portforward_take_error(asb_portforward *pf, asb_error *err) {
    int had;
    if (!pf) return 0;
    pthread_mutex_lock(&pf->lock);
    had = pf->has_error;
    if (had && err) *err = pf->last_error;
    pf->has_error = 0;
    pthread_mutex_unlock(&pf->lock);
    return had;
}

ASB_API void asb_portforward_counts(asb_portforward *pf, unsigned long *opened,
                                    unsigned long *live) {
    if (!pf) return;
    pthread_mutex_lock(&pf->lock);
    if (opened) *opened = pf->opened;
    if (live) *live = pf->live;
    pthread_mutex_unlock(&pf->lock);
}

ASB_API void asb_portforward_free(asb_portforward *pf) {
    if (!pf) return;
    asb__pf_reap(pf, 1);
    pthread_mutex_destroy(&pf->lock);
    pf->alloc.free_fn(pf, pf->alloc.user_data);
}

/* >>trace ===================================================================
   OpenTelemetry spans and latency histograms, without OpenTelemetry: the
   ids come from the CSPRNG, spans are encoded with the JSON writer and
   sent by the HTTP client, as OTLP/HTTP JSON, from one thread per client.
   Everything here hangs off asb_client.tracer, NULL when tracing is off:
   every hook then costs one test of a NULL pointer (asb__span_start
   leaves s->t NULL, and every other call returns at once). */

#if ASB_TRACING

#define ASB__SPAN_ATTRS 8
#define ASB__OTLP_MAX_HEADERS 16
#define ASB__OTLP_MAX_VALUE 1024 /* bytes of a string attribute, exported */

/* One histogram series. */
typedef struct asb__hist {
    uint64_t count;
    double sum, min, max;
    uint64_t buckets[ASB_LATENCY_MAX_BUCKETS + 1];
} asb__hist;

typedef struct asb__tracer {
    asb_allocator alloc;
    asb_logger log;
    char service[104];
    char state[520];          /* tracestate sent on, "" for none */
    int has_parent;
    asb_trace_context parent;
    asb_span_end_fn on_end;
    void *user_data;
    int64_t start_unix_ns;    /* the histograms' start time */
    pthread_mutex_t lock;     /* below; held briefly, never while sending */
    asb__hist hist[ASB_LATENCY_KIND_COUNT][2];
    int hist_dirty;           /* a latency recorded since the last export */
    /* the exporter (exporting 0: none) */
    int exporting;
    asb_http_client *http;
    char *traces_url, *metrics_url;
    asb_http_header headers[ASB__OTLP_MAX_HEADERS];
    size_t header_count;
    char *header_mem;         /* the header names and values */
    size_t header_mem_len;
    int timeout_ms, interval_ms;
    size_t max_queued;
    asb_buf queue;            /* span objects, comma-separated */
    size_t queued;
    uint64_t dropped;
    int drop_logged;          /* the first drop of a run of them was logged */
    int fail_logged;          /* an export failed and was logged; a success re-arms */
    int stop;
    int thread_started;
    pthread_cond_t cv;
    pthread_t thread;
} asb__tracer;

/* A span being recorded, on the stack of the call it times. */
typedef struct asb__span {
    asb__tracer *t;           /* NULL: not recording */
    const char *op;
    asb_latency_kind kind;    /* ASB_LATENCY_KIND_COUNT: no histogram */
    asb_trace_context ctx;
    unsigned char parent[8];
    int64_t start_ns;         /* wall clock, for the span */
    int64_t t0_ns;            /* monotonic, for the latency */
    asb_span_attr attrs[ASB__SPAN_ATTRS];
    size_t nattr;
    char buf[64];             /* one attribute's own copy: the executable,
                                 the shutdown time */
} asb__span;

static const double asb__lat_bounds_slow[] = {100, 250, 500, 750, 1000, 1250, 1500, 2000,
                                              2500, 5000, 10000, 30000, 60000, 120000, 240000};
static const double asb__lat_bounds_call[] = {1,    2,    5,     10,    25,    50,    100,
                                              250,  500,  1000,  2500,  5000,  10000, 30000,
                                              60000, 120000, 240000};

/* name, attribute, value, span operation, slow bounds? */
static const struct asb__lat_info {
    const char *metric, *label, *value;
    int slow;
} asb__lat_info[ASB_LATENCY_KIND_COUNT] = {
    {"sandbox_client_create_ready_latency_ms", "op", "create_sandbox", 1},
    {"sandbox_client_discovery_latency_ms", "mode", "port_forward", 1},
    {"sandbox_client_discovery_latency_ms", "mode", "gateway", 1},
    {"sandbox_client_call_latency_ms", "op", "create_claim", 0},
    {"sandbox_client_call_latency_ms", "op", "wait_for_claim_ready", 1},
    {"sandbox_client_call_latency_ms", "op", "delete_claim", 0},
    {"sandbox_client_call_latency_ms", "op", "run", 0},
    {"sandbox_client_call_latency_ms", "op", "write", 0},
    {"sandbox_client_call_latency_ms", "op", "read", 0},
    {"sandbox_client_call_latency_ms", "op", "list", 0},
    {"sandbox_client_call_latency_ms", "op", "exists", 0},
};

static void asb__lat_bounds(asb_latency_kind k, const double **b, size_t *n) {
    if (asb__lat_info[k].slow) {
        *b = asb__lat_bounds_slow;
        *n = sizeof asb__lat_bounds_slow / sizeof asb__lat_bounds_slow[0];
    } else {
        *b = asb__lat_bounds_call;
        *n = sizeof asb__lat_bounds_call / sizeof asb__lat_bounds_call[0];
    }
}

static int64_t asb__wall_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t asb__mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void asb__hex(char *out, const unsigned char *p, size_t n) {
    static const char hex[] = "0123456789abcdef";
    size_t i;
    for (i = 0; i < n; i++) {
        out[2 * i] = hex[p[i] >> 4];
        out[2 * i + 1] = hex[p[i] & 15];
    }
    out[2 * n] = '\0';
}

static int asb__all_zero(const unsigned char *p, size_t n) {
    size_t i;
    for (i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

/* Records one latency (under the lock: calls on several threads). */
static void asb__hist_add(asb__tracer *t, asb_latency_kind k, int failed, double ms) {
    const double *b;
    size_t n, i;
    asb__hist *h;
    if (!t || (int)k < 0 || k >= ASB_LATENCY_KIND_COUNT) return;
    asb__lat_bounds(k, &b, &n);
    for (i = 0; i < n && ms > b[i]; i++) {}
    pthread_mutex_lock(&t->lock);
    h = &t->hist[k][failed ? 1 : 0];
    if (h->count == 0 || ms < h->min) h->min = ms;
    if (h->count == 0 || ms > h->max) h->max = ms;
    h->count++;
    h->sum += ms;
    h->buckets[i]++;
    t->hist_dirty = 1;
    pthread_mutex_unlock(&t->lock);
}

/* Starts a span: `parent` (a lifecycle span's context) or, with none, the
   tracer's own parent, else a new trace. tracer NULL: nothing at all. */
static void asb__span_start(asb__tracer *t, asb__span *s, const char *op, asb_latency_kind kind,
                            const asb_trace_context *parent) {
    s->t = t;
    if (!t) return;
    s->op = op;
    s->kind = kind;
    s->nattr = 0;
    s->buf[0] = '\0';
    if (!parent && t->has_parent) parent = &t->parent;
    if (parent) {
        memcpy(s->ctx.trace_id, parent->trace_id, 16);
        memcpy(s->parent, parent->span_id, 8);
        s->ctx.flags = parent->flags;
    } else {
        memset(s->parent, 0, 8);
        s->ctx.flags = 1;
        do asb__id_bytes(s->ctx.trace_id, 16);
        while (asb__all_zero(s->ctx.trace_id, 16));
    }
    do asb__id_bytes(s->ctx.span_id, 8);
    while (asb__all_zero(s->ctx.span_id, 8));
    s->start_ns = asb__wall_ns();
    s->t0_ns = asb__mono_ns();
}

/* Attributes: values are borrowed until asb__span_end (strings from the
   call's arguments or the handle). */
static void asb__span_str(asb__span *s, const char *key, const char *v) {
    if (!s || !s->t || s->nattr >= ASB__SPAN_ATTRS || !v) return;
    s->attrs[s->nattr].key = key;
    s->attrs[s->nattr].type = ASB_ATTR_STRING;
    s->attrs[s->nattr].str = v;
    s->attrs[s->nattr++].num = 0;
}

static void asb__span_int(asb__span *s, const char *key, int64_t v, asb_attr_type type) {
    if (!s || !s->t || s->nattr >= ASB__SPAN_ATTRS) return;
    s->attrs[s->nattr].key = key;
    s->attrs[s->nattr].type = type;
    s->attrs[s->nattr].str = NULL;
    s->attrs[s->nattr++].num = v;
}

/* The command's program, and only that (asb__command_executable: no
   argument, no VAR=value, no path). */
static void asb__command_executable(const char *cmd, char *out, size_t cap);
static void asb__span_command(asb__span *s, const char *cmd) {
    if (!s->t) return;
    asb__command_executable(cmd ? cmd : "", s->buf, sizeof s->buf);
    asb__span_str(s, "sandbox.command.executable", s->buf);
}

/* An attribute whose value does not outlive the span: copied (one per
   span). s may be NULL. */
static void asb__span_str_copy(asb__span *s, const char *key, const char *v) {
    if (!s || !s->t) return;
    snprintf(s->buf, sizeof s->buf, "%s", v);
    asb__span_str(s, key, s->buf);
}

/* A span's context as a parent, NULL when it records nothing. */
static const asb_trace_context *asb__span_ctx(const asb__span *s) {
    return s && s->t ? &s->ctx : NULL;
}

/* One OTLP/JSON attribute. */
static void asb__otlp_attr(asb_json_writer *w, const char *key, const asb_span_attr *a,
                           const char *sval) {
    char num[24];
    asb_json_object_begin(w);
    asb_json_key(w, "key");
    asb_json_string(w, key);
    asb_json_key(w, "value");
    asb_json_object_begin(w);
    if (sval || (a && a->type == ASB_ATTR_STRING)) {
        const char *v = sval ? sval : a->str;
        size_t n = strlen(v);
        asb_json_key(w, "stringValue");
        /* a caller's path may be any length: the queue's memory is bounded
           by spans x attributes x this (a cut character becomes U+FFFD) */
        asb_json_string_n(w, v, n < ASB__OTLP_MAX_VALUE ? n : ASB__OTLP_MAX_VALUE);
    } else if (a->type == ASB_ATTR_BOOL) {
        asb_json_key(w, "boolValue");
        asb_json_bool(w, a->num != 0);
    } else {
        snprintf(num, sizeof num, "%lld", (long long)a->num);
        asb_json_key(w, "intValue"); /* int64 as a string, as OTLP/JSON has it */
        asb_json_string(w, num);
    }
    asb_json_object_end(w);
    asb_json_object_end(w);
}

static void asb__otlp_resource(asb_json_writer *w, const asb__tracer *t) {
    asb_json_key(w, "resource");
    asb_json_object_begin(w);
    asb_json_key(w, "attributes");
    asb_json_array_begin(w);
    asb__otlp_attr(w, "service.name", NULL, t->service);
    asb__otlp_attr(w, "telemetry.sdk.name", NULL, "agentsandbox.h");
    asb__otlp_attr(w, "telemetry.sdk.language", NULL, "c");
    asb__otlp_attr(w, "telemetry.sdk.version", NULL, ASB_VERSION_STRING);
    asb_json_array_end(w);
    asb_json_object_end(w);
}

static void asb__otlp_scope(asb_json_writer *w) {
    asb_json_key(w, "scope");
    asb_json_object_begin(w);
    asb_json_key(w, "name");
    asb_json_string(w, "agentsandbox.h");
    asb_json_key(w, "version");
    asb_json_string(w, ASB_VERSION_STRING);
    asb_json_object_end(w);
}

/* One span as an OTLP/JSON Span object. */
static asb_result asb__otlp_span(asb_buf *b, const asb_span_data *d) {
    asb_json_writer w;
    char hex[40], num[24];
    size_t i;
    asb_json_writer_init(&w, b);
    w.replace_invalid_utf8 = 1; /* a path in an attribute may be any bytes */
    asb_json_object_begin(&w);
    asb_json_key(&w, "traceId");
    asb__hex(hex, d->ctx.trace_id, 16);
    asb_json_string(&w, hex);
    asb_json_key(&w, "spanId");
    asb__hex(hex, d->ctx.span_id, 8);
    asb_json_string(&w, hex);
    if (!asb__all_zero(d->parent_span_id, 8)) {
        asb_json_key(&w, "parentSpanId");
        asb__hex(hex, d->parent_span_id, 8);
        asb_json_string(&w, hex);
    }
    asb_json_key(&w, "flags");
    asb_json_int64(&w, 0x100 | (d->ctx.flags & 0xff)); /* has-is-remote bit, not remote */
    asb_json_key(&w, "name");
    asb_json_string(&w, d->name);
    asb_json_key(&w, "kind");
    asb_json_int64(&w, 1); /* SPAN_KIND_INTERNAL, as the reference's spans */
    asb_json_key(&w, "startTimeUnixNano");
    snprintf(num, sizeof num, "%lld", (long long)d->start_unix_ns);
    asb_json_string(&w, num);
    asb_json_key(&w, "endTimeUnixNano");
    snprintf(num, sizeof num, "%lld", (long long)d->end_unix_ns);
    asb_json_string(&w, num);
    asb_json_key(&w, "attributes");
    asb_json_array_begin(&w);
    for (i = 0; i < d->attr_count; i++) asb__otlp_attr(&w, d->attrs[i].key, &d->attrs[i], NULL);
    asb_json_array_end(&w);
    asb_json_key(&w, "status");
    asb_json_object_begin(&w);
    if (d->status != ASB_OK) {
        asb_json_key(&w, "code");
        asb_json_int64(&w, 2); /* STATUS_CODE_ERROR */
        asb_json_key(&w, "message");
        asb_json_string(&w, asb_result_str(d->status)); /* never err->message: it may quote a body */
    }
    asb_json_object_end(&w);
    asb_json_object_end(&w);
    return asb_json_writer_finish(&w);
}

/* Ends a span: its latency, the callback, the exporter's queue. The
   span's error code is the call's; err (may be NULL) adds its HTTP
   status. */
static void asb__span_end(asb__span *s, asb_result r, const asb_error *err) {
    asb__tracer *t = s->t;
    asb_span_data d;
    char name[160];
    if (!t) return;
    if (r != ASB_OK) {
        asb__span_int(s, "asb.error.code", (int64_t)r, ASB_ATTR_INT);
        asb__span_str(s, "error.type", asb_result_str(r));
        if (err && err->http_status > 0)
            asb__span_int(s, "http.response.status_code", err->http_status, ASB_ATTR_INT);
    }
    s->t = NULL; /* ended once */
    memset(&d, 0, sizeof d);
    snprintf(name, sizeof name, "%s.%s", t->service, s->op);
    d.name = name;
    d.ctx = s->ctx;
    memcpy(d.parent_span_id, s->parent, 8);
    d.start_unix_ns = s->start_ns;
    d.end_unix_ns = asb__wall_ns();
    d.attrs = s->attrs;
    d.attr_count = s->nattr;
    d.status = r;
    if (s->kind != ASB_LATENCY_KIND_COUNT)
        asb__hist_add(t, s->kind, r != ASB_OK, (double)(asb__mono_ns() - s->t0_ns) / 1e6);
    if (t->on_end) t->on_end(t->user_data, &d);
    if (t->exporting) {
        int drop_log = 0;
        pthread_mutex_lock(&t->lock);
        if (t->queued >= t->max_queued) {
            t->dropped++;
            if (!t->drop_logged) drop_log = t->drop_logged = 1;
        } else {
            size_t mark = t->queue.len;
            if (t->queued) asb_buf_append(&t->queue, ",", 1);
            if (asb__otlp_span(&t->queue, &d) == ASB_OK) {
                t->queued++;
                if (t->queued >= 512) pthread_cond_signal(&t->cv); /* a full batch */
            } else {
                t->queue.len = mark; /* out of memory: this span is lost, not the batch */
                if (t->queue.ptr) t->queue.ptr[mark] = '\0';
                t->dropped++;
            }
        }
        pthread_mutex_unlock(&t->lock);
        if (drop_log)
            asb__log(&t->log, ASB_LOG_WARN, "otel.drop",
                     "the exporter's queue is full (%zu spans): spans are dropped until it "
                     "drains",
                     t->max_queued);
    }
}

/* Adds a latency without a span (create to ready; tunnel start, Gateway
   discovery, in ms). */
static void asb__latency(asb__tracer *t, asb_latency_kind k, int failed, int64_t t0_ns) {
    if (t) asb__hist_add(t, k, failed, (double)(asb__mono_ns() - t0_ns) / 1e6);
}

static void asb__latency_ms(asb__tracer *t, asb_latency_kind k, int failed, int64_t ms) {
    if (t) asb__hist_add(t, k, failed, (double)ms);
}

/* The traceparent (and tracestate) of the span a call is in, as request
   headers: tp must outlive the request. Returns how many were added. The
   names are lower case, so a runtime speaking gRPC (sandboxd) passes the
   same pairs as its call's metadata (asb_grpc_call_desc.metadata). */
static size_t asb__trace_headers(const asb__span *s, asb_http_header *h, char *tp) {
    size_t n = 0;
    if (!s || !s->t) return 0;
    asb_traceparent_format(&s->ctx, tp);
    h[n].name = "traceparent";
    h[n++].value = tp;
    if (s->t->state[0]) {
        h[n].name = "tracestate";
        h[n++].value = s->t->state;
    }
    return n;
}

/* The claim's opentelemetry.io/trace-context annotation, as the reference
   writes it: {"traceparent": ..., "tracestate": ...} of the create_claim
   span. */
static void asb__trace_annotation(const asb__span *s, asb_json_writer *w) {
    char tp[ASB_TRACEPARENT_SIZE], val[700];
    if (!s || !s->t) return;
    asb_traceparent_format(&s->ctx, tp);
    if (s->t->state[0])
        snprintf(val, sizeof val, "{\"traceparent\": \"%s\", \"tracestate\": \"%s\"}", tp,
                 s->t->state); /* both checked: no quote or backslash */
    else
        snprintf(val, sizeof val, "{\"traceparent\": \"%s\"}", tp);
    asb_json_key(w, "opentelemetry.io/trace-context");
    asb_json_string(w, val);
}

/* -- the OTLP/HTTP exporter ---------------------------------------------------- */

/* One POST; failures are the caller's to log (once). */
static asb_result asb__otlp_post(asb__tracer *t, const char *url, const asb_buf *body,
                                 asb_error *err) {
    asb_http_request req;
    asb_http_response resp;
    asb_http_header h[ASB__OTLP_MAX_HEADERS + 1];
    asb_retry_policy once;
    asb_result r;
    size_t i;
    memset(&req, 0, sizeof req);
    memset(&once, 0, sizeof once);
    once.max_attempts = 1; /* a failed batch is dropped, not retried: the
                              next one must not wait behind it */
    h[0].name = "Content-Type";
    h[0].value = "application/json";
    for (i = 0; i < t->header_count; i++) h[i + 1] = t->headers[i];
    req.method = "POST";
    req.url = url;
    req.headers = h;
    req.header_count = t->header_count + 1;
    req.body = body->ptr;
    req.body_len = body->len;
    req.retry = &once;
    req.timeout_ms = t->timeout_ms;
    req.read_timeout_ms = t->timeout_ms;
    r = asb_http_do(t->http, &req, &resp, err);
    asb_http_response_free(&resp);
    return r;
}

/* The histograms as an OTLP/JSON metrics request (cumulative). */
static asb_result asb__otlp_metrics(asb__tracer *t, const asb__hist (*h)[2], asb_buf *b) {
    asb_json_writer w;
    char num[32];
    int64_t now = asb__wall_ns();
    const char *names[] = {"sandbox_client_create_ready_latency_ms",
                           "sandbox_client_discovery_latency_ms",
                           "sandbox_client_call_latency_ms"};
    size_t m, k, f, i, n;
    const double *bounds;
    asb_json_writer_init(&w, b);
    w.replace_invalid_utf8 = 1;
    asb_json_object_begin(&w);
    asb_json_key(&w, "resourceMetrics");
    asb_json_array_begin(&w);
    asb_json_object_begin(&w);
    asb__otlp_resource(&w, t);
    asb_json_key(&w, "scopeMetrics");
    asb_json_array_begin(&w);
    asb_json_object_begin(&w);
    asb__otlp_scope(&w);
    asb_json_key(&w, "metrics");
    asb_json_array_begin(&w);
    for (m = 0; m < 3; m++) {
        int any = 0;
        for (k = 0; k < ASB_LATENCY_KIND_COUNT; k++)
            if (strcmp(asb__lat_info[k].metric, names[m]) == 0 && (h[k][0].count || h[k][1].count))
                any = 1;
        if (!any) continue;
        asb_json_object_begin(&w);
        asb_json_key(&w, "name");
        asb_json_string(&w, names[m]);
        asb_json_key(&w, "unit");
        asb_json_string(&w, "ms");
        asb_json_key(&w, "histogram");
        asb_json_object_begin(&w);
        asb_json_key(&w, "aggregationTemporality");
        asb_json_int64(&w, 2); /* CUMULATIVE */
        asb_json_key(&w, "dataPoints");
        asb_json_array_begin(&w);
        for (k = 0; k < ASB_LATENCY_KIND_COUNT; k++) {
            if (strcmp(asb__lat_info[k].metric, names[m]) != 0) continue;
            asb__lat_bounds((asb_latency_kind)k, &bounds, &n);
            for (f = 0; f < 2; f++) {
                const asb__hist *p = &h[k][f];
                asb_span_attr a;
                if (!p->count) continue;
                memset(&a, 0, sizeof a);
                asb_json_object_begin(&w);
                asb_json_key(&w, "attributes");
                asb_json_array_begin(&w);
                asb__otlp_attr(&w, asb__lat_info[k].label, &a, asb__lat_info[k].value);
                asb__otlp_attr(&w, "status", &a, f ? "failure" : "success");
                asb_json_array_end(&w);
                asb_json_key(&w, "startTimeUnixNano");
                snprintf(num, sizeof num, "%lld", (long long)t->start_unix_ns);
                asb_json_string(&w, num);
                asb_json_key(&w, "timeUnixNano");
                snprintf(num, sizeof num, "%lld", (long long)now);
                asb_json_string(&w, num);
                asb_json_key(&w, "count");
                snprintf(num, sizeof num, "%llu", (unsigned long long)p->count);
                asb_json_string(&w, num);
                asb_json_key(&w, "sum");
                asb_json_double(&w, p->sum);
                asb_json_key(&w, "min");
                asb_json_double(&w, p->min);
                asb_json_key(&w, "max");
                asb_json_double(&w, p->max);
                asb_json_key(&w, "bucketCounts");
                asb_json_array_begin(&w);
                for (i = 0; i <= n; i++) {
                    snprintf(num, sizeof num, "%llu", (unsigned long long)p->buckets[i]);
                    asb_json_string(&w, num);
                }
                asb_json_array_end(&w);
                asb_json_key(&w, "explicitBounds");
                asb_json_array_begin(&w);
                for (i = 0; i < n; i++) asb_json_double(&w, bounds[i]);
                asb_json_array_end(&w);
                asb_json_object_end(&w);
            }
        }
        asb_json_array_end(&w);
        asb_json_object_end(&w);
        asb_json_object_end(&w);
    }
    asb_json_array_end(&w);
    asb_json_object_end(&w);
    asb_json_array_end(&w);
    asb_json_object_end(&w);
    asb_json_array_end(&w);
    asb_json_object_end(&w);
    return asb_json_writer_finish(&w);
}

/* Logs an export failure once per run of failures (the first), never
   the headers (they may hold a key). */
static void asb__otlp_failed(asb__tracer *t, const char *what, size_t spans, asb_result r,
                             const asb_error *e) {
    if (t->fail_logged) return;
    t->fail_logged = 1;
    asb__log(&t->log, ASB_LOG_WARN, "otel.export",
             "%s export failed, %zu span%s dropped; later failures are not logged until an "
             "export succeeds: %s",
             what, spans, spans == 1 ? "" : "s", e->message[0] ? e->message : asb_result_str(r));
}

/* The exporter thread: every interval (or at a full batch, or at stop)
   it takes the queued spans and sends them, then the histograms if they
   changed. Nothing a call does waits for it. */
static void *asb__otlp_thread(void *arg) {
    asb__tracer *t = (asb__tracer *)arg;
    asb_buf batch, body;
    asb__hist snap[ASB_LATENCY_KIND_COUNT][2];
    asb_buf_init(&batch, &t->alloc);
    asb_buf_init(&body, &t->alloc);
    pthread_mutex_lock(&t->lock);
    for (;;) {
        int stop, metrics;
        size_t spans;
        asb_buf tmp;
        if (!t->stop && t->queued < 512) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            ts.tv_sec += t->interval_ms / 1000;
            ts.tv_nsec += (long)(t->interval_ms % 1000) * 1000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&t->cv, &t->lock, &ts);
        }
        stop = t->stop;
        spans = t->queued;
        tmp = batch; /* swap: the callers go on filling an empty queue */
        batch = t->queue;
        t->queue = tmp;
        t->queue.len = 0;
        t->queued = 0;
        metrics = t->hist_dirty;
        if (metrics) memcpy(snap, t->hist, sizeof snap);
        t->hist_dirty = 0;
        pthread_mutex_unlock(&t->lock);
        if (spans) {
            asb_error e;
            asb_result r;
            static const char head[] = "{\"resourceSpans\":[{";
            asb_json_writer w;
            body.len = 0;
            /* the resource and scope through the writer, the spans as queued */
            asb_buf_append(&body, head, sizeof head - 1);
            {
                asb_buf res;
                asb_buf_init(&res, &t->alloc);
                asb_json_writer_init(&w, &res);
                w.replace_invalid_utf8 = 1; /* a service name of any bytes */
                asb_json_object_begin(&w);
                asb__otlp_resource(&w, t);
                asb_json_object_end(&w);
                if (asb_json_writer_finish(&w) == ASB_OK && res.len > 2)
                    asb_buf_append(&body, res.ptr + 1, res.len - 2); /* without its braces */
                res.len = 0;
                asb_json_writer_init(&w, &res);
                asb_json_object_begin(&w);
                asb__otlp_scope(&w);
                asb_json_object_end(&w);
                asb_buf_append(&body, ",\"scopeSpans\":[{", 16);
                if (asb_json_writer_finish(&w) == ASB_OK && res.len > 2)
                    asb_buf_append(&body, res.ptr + 1, res.len - 2);
                asb_buf_free(&res);
            }
            asb_buf_append(&body, ",\"spans\":[", 10);
            asb_buf_append(&body, batch.ptr, batch.len);
            asb_buf_append(&body, "]}]}]}", 6);
            memset(&e, 0, sizeof e);
            r = body.ptr ? asb__otlp_post(t, t->traces_url, &body, &e) : ASB_ERR_OUT_OF_MEMORY;
            if (r != ASB_OK) asb__otlp_failed(t, "trace", spans, r, &e);
            else t->fail_logged = 0;
        }
        batch.len = 0;
        if (metrics) {
            asb_error e;
            asb_result r;
            body.len = 0;
            memset(&e, 0, sizeof e);
            r = asb__otlp_metrics(t, (const asb__hist(*)[2])snap, &body);
            if (r == ASB_OK) r = asb__otlp_post(t, t->metrics_url, &body, &e);
            if (r != ASB_OK) asb__otlp_failed(t, "metrics", 0, r, &e);
        }
        pthread_mutex_lock(&t->lock);
        if (stop) break;
        if (spans) t->drop_logged = 0; /* the queue drained: log the next overflow */
    }
    pthread_mutex_unlock(&t->lock);
    asb_buf_free(&batch);
    asb_buf_free(&body);
    return NULL;
}

/* A URL from an option, else an environment variable, else base+suffix. */
static char *asb__otlp_url(asb__tracer *t, const char *opt, const char *env, const char *base,
                           const char *suffix) {
    const char *v = opt && *opt ? opt : getenv(env);
    size_t n;
    char *u;
    if (v && *v) return asb__strdup(&t->alloc, v, strlen(v));
    n = strlen(base);
    while (n && base[n - 1] == '/') n--;
    u = (char *)t->alloc.alloc_fn(n + strlen(suffix) + 1, t->alloc.user_data);
    if (!u) return NULL;
    memcpy(u, base, n);
    memcpy(u + n, suffix, strlen(suffix) + 1);
    return u;
}

static int asb__unhex(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* "k=v,k2=v2" (OTEL_EXPORTER_OTLP_HEADERS' format: values percent-
   encoded, blanks around items ignored) into t->headers. The error never
   quotes a value. */
static asb_result asb__otlp_headers(asb__tracer *t, const char *s, asb_error *err) {
    size_t n = strlen(s), o = 0;
    const char *p = s, *end = s + n;
    char *m = (char *)t->alloc.alloc_fn(n + 1, t->alloc.user_data);
    if (!m) return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "out of memory");
    memset(m, 0, n + 1);
    t->header_mem = m;
    t->header_mem_len = n + 1;
    while (p < end) {
        const char *item_end = (const char *)memchr(p, ',', (size_t)(end - p));
        const char *eq, *ks, *ke, *vs, *ve;
        char *name, *value;
        if (!item_end) item_end = end;
        ks = p;
        while (ks < item_end && (*ks == ' ' || *ks == '\t')) ks++;
        if (ks == item_end) { /* an empty item */
            p = item_end + 1;
            continue;
        }
        eq = (const char *)memchr(ks, '=', (size_t)(item_end - ks));
        if (!eq || eq == ks || t->header_count >= ASB__OTLP_MAX_HEADERS)
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                             "tracer: OTLP headers: item %zu is not key=value (or more than "
                             "%d items)",
                             t->header_count + 1, ASB__OTLP_MAX_HEADERS);
        ke = eq;
        while (ke > ks && (ke[-1] == ' ' || ke[-1] == '\t')) ke--;
        vs = eq + 1;
        while (vs < item_end && (*vs == ' ' || *vs == '\t')) vs++;
        ve = item_end;
        while (ve > vs && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
        name = m + o;
        memcpy(name, ks, (size_t)(ke - ks));
        o += (size_t)(ke - ks);
        m[o++] = '\0';
        value = m + o;
        for (; vs < ve; vs++) {
            int hi, lo;
            if (*vs == '%' && ve - vs >= 3 && (hi = asb__unhex(vs[1])) >= 0 &&
                (lo = asb__unhex(vs[2])) >= 0) {
                m[o++] = (char)(hi * 16 + lo);
                vs += 2;
            } else {
                m[o++] = *vs;
            }
        }
        m[o++] = '\0';
        if (strlen(value) != (size_t)(m + o - 1 - value) || strpbrk(name, "\r\n: ") ||
            strpbrk(value, "\r\n"))
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                             "tracer: OTLP header %zu has a forbidden byte (CR, LF, NUL, or "
                             "':' or a blank in its name)",
                             t->header_count + 1);
        t->headers[t->header_count].name = name;
        t->headers[t->header_count++].value = value;
        p = item_end + 1;
    }
    return ASB_OK;
}

static void asb__tracer_free(asb__tracer *t) {
    if (!t) return;
    if (t->thread_started) {
        pthread_mutex_lock(&t->lock);
        t->stop = 1;
        pthread_cond_signal(&t->cv);
        pthread_mutex_unlock(&t->lock);
        pthread_join(t->thread, NULL); /* the last batch: at most otlp_timeout_ms */
    }
    if (t->dropped)
        asb__log(&t->log, ASB_LOG_WARN, "otel.drop", "%llu span%s dropped in all",
                 (unsigned long long)t->dropped, t->dropped == 1 ? " was" : "s were");
    asb_http_client_free(t->http);
    if (t->header_mem) {
        asb__wipe(t->header_mem, t->header_mem_len); /* may hold an API key */
        t->alloc.free_fn(t->header_mem, t->alloc.user_data);
    }
    t->alloc.free_fn(t->traces_url, t->alloc.user_data);
    t->alloc.free_fn(t->metrics_url, t->alloc.user_data);
    asb_buf_free(&t->queue);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->lock);
    t->alloc.free_fn(t, t->alloc.user_data);
}

static int asb__env_true(const char *name) {
    const char *v = getenv(name);
    return v && (strcmp(v, "true") == 0 || strcmp(v, "TRUE") == 0 || strcmp(v, "True") == 0);
}

/* Makes the tracer of a client (*out NULL when tracing is off). */
static asb_result asb__tracer_create(const asb_tracer_desc *d, const asb_allocator *a,
                                     const asb_logger *log, asb__tracer **out,
                                     asb_error *err) {
    asb__tracer *t;
    const char *svc, *ev;
    int otlp;
    asb_result r = ASB_OK;
    *out = NULL;
    if (!d->enable || asb__env_true("OTEL_SDK_DISABLED")) return ASB_OK;
    svc = d->service_name && *d->service_name ? d->service_name : getenv("OTEL_SERVICE_NAME");
    if (!svc || !*svc) svc = "sandbox-client";
    if (strlen(svc) > 100)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "tracer: service_name over 100 bytes");
    if (d->parent_state &&
        (strlen(d->parent_state) > 512 || strpbrk(d->parent_state, "\"\\\r\n")))
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "tracer: parent_state over 512 bytes or with a quote, backslash, CR "
                         "or LF");
    t = (asb__tracer *)a->alloc_fn(sizeof *t, a->user_data);
    if (!t) return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "out of memory");
    memset(t, 0, sizeof *t);
    t->alloc = *a;
    t->log = *log;
    pthread_mutex_init(&t->lock, NULL);
    {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&t->cv, &ca);
        pthread_condattr_destroy(&ca);
    }
    asb_buf_init(&t->queue, &t->alloc);
    snprintf(t->service, sizeof t->service, "%s", svc);
    if (d->parent_state) snprintf(t->state, sizeof t->state, "%s", d->parent_state);
    if (d->parent) {
        r = asb_traceparent_parse(d->parent, strlen(d->parent), &t->parent, err);
        if (r != ASB_OK) {
            asb__tracer_free(t);
            return r;
        }
        t->has_parent = 1;
    }
    t->on_end = d->on_span_end;
    t->user_data = d->user_data;
    t->start_unix_ns = asb__wall_ns();
    ev = getenv("OTEL_TRACES_EXPORTER");
    otlp = d->otlp;
    if (otlp == 0) {
        if (ev && strcmp(ev, "none") == 0) otlp = -1;
        else if ((d->otlp_endpoint && *d->otlp_endpoint) ||
                 (d->otlp_traces_endpoint && *d->otlp_traces_endpoint) ||
                 (getenv("OTEL_EXPORTER_OTLP_ENDPOINT") && *getenv("OTEL_EXPORTER_OTLP_ENDPOINT")) ||
                 (getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") &&
                  *getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")) ||
                 (ev && strcmp(ev, "otlp") == 0))
            otlp = 1;
    }
    if (otlp == 1) {
        asb_http_client_desc hd;
        const char *base = d->otlp_endpoint && *d->otlp_endpoint
                               ? d->otlp_endpoint
                               : getenv("OTEL_EXPORTER_OTLP_ENDPOINT");
        const char *hdrs = d->otlp_headers ? d->otlp_headers : getenv("OTEL_EXPORTER_OTLP_HEADERS");
        if (!base || !*base) base = "http://localhost:4318";
        t->timeout_ms = d->otlp_timeout_ms > 0 ? d->otlp_timeout_ms : 10000;
        t->interval_ms = d->export_interval_ms > 0 ? d->export_interval_ms : 1000;
        t->max_queued = d->max_queued_spans ? d->max_queued_spans : 2048;
        t->traces_url = asb__otlp_url(t, d->otlp_traces_endpoint,
                                      "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", base, "/v1/traces");
        t->metrics_url = asb__otlp_url(t, d->otlp_metrics_endpoint,
                                       "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", base, "/v1/metrics");
        if (!t->traces_url || !t->metrics_url) r = asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "out of memory");
        if (r == ASB_OK && hdrs && *hdrs) r = asb__otlp_headers(t, hdrs, err);
        if (r == ASB_OK) {
            asb_url u;
            if (asb_url_parse(t->traces_url, strlen(t->traces_url), &u, NULL) != ASB_OK ||
                asb_url_parse(t->metrics_url, strlen(t->metrics_url), &u, NULL) != ASB_OK)
                r = asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                              "tracer: the OTLP endpoint is not an http(s) URL");
        }
        if (r == ASB_OK) {
            memset(&hd, 0, sizeof hd);
            hd.allocator = &t->alloc;
            hd.connect_timeout_ms = t->timeout_ms;
            hd.read_timeout_ms = t->timeout_ms;
            hd.max_body_bytes = 64 * 1024; /* the collector's answers are small */
            hd.max_idle_connections = 1;
            r = asb_http_client_create(&hd, &t->http, err);
        }
        if (r == ASB_OK) {
            t->exporting = 1;
            if (pthread_create(&t->thread, NULL, asb__otlp_thread, t) != 0)
                r = asb__fail(err, ASB_ERR_IO, "tracer: cannot start the exporter thread");
            else
                t->thread_started = 1;
        }
        if (r != ASB_OK) {
            asb__tracer_free(t);
            return r;
        }
    }
    *out = t;
    return ASB_OK;
}

#else /* ASB_TRACING 0: the hooks compile to nothing */

typedef struct asb__tracer asb__tracer;
typedef struct asb__span {
    asb__tracer *t;
} asb__span;
#define asb__span_start(tr, s, op, kind, parent) ((void)(tr), (void)(parent), (s)->t = NULL)
#define asb__span_str(s, k, v) ((void)(s), (void)(v))
#define asb__span_str_copy(s, k, v) ((void)(s), (void)(v))
#define asb__span_int(s, k, v, type) ((void)(s), (void)(v))
#define asb__span_command(s, cmd) ((void)(s), (void)(cmd))
#define asb__span_end(s, r, err) ((void)(s), (void)(r), (void)(err))
#define asb__span_ctx(s) ((void)(s), (const asb_trace_context *)NULL)
#define asb__latency(tr, k, failed, t0) ((void)(tr))
#define asb__latency_ms(tr, k, failed, ms) ((void)(tr), (void)(ms))
#define asb__trace_headers(s, h, tp) ((void)(s), (void)(h), (void)(tp), (size_t)0)
#define asb__trace_annotation(s, w) ((void)(s), (void)(w))
#define asb__tracer_free(tr) ((void)(tr))

#endif /* ASB_TRACING */

ASB_API asb_result asb_traceparent_parse(const char *s, size_t len, asb_trace_context *out,
                                         asb_error *err) {
    size_t i;
    static const char *const field[] = {"version", "trace-id", "parent-id", "flags"};
    static const size_t width[] = {2, 32, 16, 2};
    size_t pos = 0, f;
    unsigned char version = 0;
    if (!s || !out) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "traceparent: NULL argument");
    memset(out, 0, sizeof *out);
    for (f = 0; f < 4; f++) {
        if (pos + width[f] > len)
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "traceparent: %s is cut short",
                             field[f]);
        for (i = 0; i < width[f]; i++) {
            char c = s[pos + i];
            int v = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
            unsigned char *dst;
            if (v < 0)
                return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                                 "traceparent: %s is not lower-case hex", field[f]);
            dst = f == 0 ? &version : f == 1 ? &out->trace_id[i / 2]
                                   : f == 2 ? &out->span_id[i / 2] : &out->flags;
            *dst = (unsigned char)((i % 2 == 0) ? (v << 4) : (*dst | v));
        }
        pos += width[f];
        if (f < 3) {
            if (pos >= len || s[pos] != '-')
                return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                                 "traceparent: a '-' must follow the %s", field[f]);
            pos++;
        }
    }
    if (version == 0xff)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "traceparent: version ff is invalid");
    if (pos != len && (version == 0 || s[pos] != '-'))
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "traceparent: bytes after the flags");
    for (i = 0; i < 16 && !out->trace_id[i]; i++) {}
    if (i == 16) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "traceparent: trace-id is zero");
    for (i = 0; i < 8 && !out->span_id[i]; i++) {}
    if (i == 8) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "traceparent: parent-id is zero");
    return ASB_OK;
}

ASB_API void asb_traceparent_format(const asb_trace_context *ctx, char out[ASB_TRACEPARENT_SIZE]) {
    static const char hex[] = "0123456789abcdef";
    size_t i, o = 0;
    out[o++] = '0';
    out[o++] = '0';
    out[o++] = '-';
    for (i = 0; i < 16; i++) {
        out[o++] = hex[ctx->trace_id[i] >> 4];
        out[o++] = hex[ctx->trace_id[i] & 15];
    }
    out[o++] = '-';
    for (i = 0; i < 8; i++) {
        out[o++] = hex[ctx->span_id[i] >> 4];
        out[o++] = hex[ctx->span_id[i] & 15];
    }
    out[o++] = '-';
    out[o++] = hex[ctx->flags >> 4];
    out[o++] = hex[ctx->flags & 15];
    out[o] = '\0';
}

/* >>sandbox (types) =========================================================
   CONNECTORS AND RUNTIMES.
   The client, the handle, and the two small interfaces the sandbox layer
   stands on, so that each way to connect and each runtime protocol lives
   in one banner of its own and a new one touches no other:

     connector  how bytes reach a sandbox. It yields an endpoint for one
                port of the sandbox (a base URL, and whether a sandbox
                router sits behind it) and owns what it started to get
                there (kubectl, the Gateway's address). Chosen per client
                by asb_client_desc.mode (asb__connector_of, the one place
                the mode is read): ">>connector: local tunnel",
                ">>connector: direct", ">>connector: gateway",
                ">>connector: in-cluster", ">>connector: native tunnel", and for
                sandboxd ">>connector: sandboxd pod tunnel", ">>connector: in-pod".
     runtime    the protocol of the server in the sandbox. It implements
                the handle's calls (run, write, read, list, exists, the
                readiness probe; stat, delete, metadata, processes where
                it has them) on the endpoints its connector gives, per
                handle: ">>runtime: legacy" (the HTTP/1.1 JSON API),
                ">>runtime: sandboxd" (REST + gRPC).

   asb__sb_call (">>sandbox") joins the two for one HTTP exchange: the
   connector's endpoint, the router's headers when the endpoint is
   routed, the deadline and the retries. It never asks which connector
   or runtime it runs for. */

typedef struct asb__tunnel asb__tunnel;

/* Where one call goes, as the connector says. */
typedef struct asb__endpoint {
    char base[600];  /* "http[s]://host:port", no path */
    int routed;      /* a sandbox router: the sandbox is named in
                        X-Sandbox-* headers, router_token and the extra
                        headers go along */
    int maybe_stale; /* an address from a cache: one quick try first,
                        looked up again if it refuses (reconnect) */
    int by_pod_ip;   /* the address is the pod's IP (reconnect may look it
                        up again) */
} asb__endpoint;

typedef struct asb__connector {
    const char *name;  /* for messages: "the local tunnel", ... */
    int routed;        /* calls go through a sandbox router: a new sandbox
                          is probed until the router can place it */
    int uses_kubectl;  /* starts kubectl with the client's kubeconfig */
    /* asb_client_create: the description's rules for this way to
       connect, before anything is allocated. NULL: none. */
    asb_result (*check)(const asb_client_desc *d, asb_error *err);
    /* asb_client_create_sandbox, once the claim exists: start what takes
       time while the controller works. Only a failure that no later call
       could get past is returned. NULL: nothing to start. */
    asb_result (*prestart)(struct asb_client *c, asb_error *err);
    /* The endpoint of one call to `port` of the sandbox (sb NULL: the
       router's, for connectors that have one). */
    asb_result (*endpoint)(struct asb_client *c, struct asb_sandbox *sb, int port,
                           asb__endpoint *ep, asb_error *err);
    /* A call to *ep never connected: rebuild what may have died (kubectl,
       a pod that moved) and set *again to send it once more to the new
       *ep. resendable: the request body can be sent again. NULL: never. */
    asb_result (*reconnect)(struct asb_client *c, struct asb_sandbox *sb, int port,
                            int resendable, asb__endpoint *ep, int *again, asb_error *err);
    /* asb_client_free: stop what the connector started. NULL: nothing. */
    void (*stop)(struct asb_client *c);
    /* The handle is done with the connection (closed, terminated, freed):
       stop what was started for it alone. NULL: nothing. */
    void (*release)(struct asb_sandbox *sb);
    /* appended to a DNS failure's message; NULL: nothing to add */
    const char *dns_hint;
    /* The client's sandbox connections come from here instead of TCP
       (asb_http_client_desc.dial). NULL: TCP to the endpoint. */
    asb_result (*dial)(struct asb_client *c, const char *host, int port, int *fd,
                       asb_error *err);
    /* A failed call's message gains what the connector knows of why (a
       port-forward stream's error). NULL: nothing. */
    void (*explain)(struct asb_client *c, asb_result r, asb_error *err);
} asb__connector;

typedef struct asb__runtime {
    const char *name; /* for messages: "legacy" */
    /* After Ready: until the runtime answers (route_only 0) or only until
       a router can place the sandbox (route_only 1), within deadline. */
    asb_result (*probe)(struct asb_sandbox *sb, int64_t deadline, const asb_cancel *cancel,
                        int route_only, asb_error *err);
    /* result is set up (empty buffers) by the caller; opts may be NULL,
       its timeout is timeout_ms (resolved) */
    asb_result (*run)(struct asb_sandbox *sb, const char *command, int timeout_ms,
                      const asb_call_opts *opts, asb_run_result *result, asb_error *err);
    /* norm: the path after asb_path_normalize; exactly size bytes */
    asb_result (*write)(struct asb_sandbox *sb, const char *norm, asb_read_fn read, void *user,
                        uint64_t size, const asb_call_opts *opts, asb_error *err);
    /* out set: appended to it, at most max_read_bytes; else to sink */
    asb_result (*read)(struct asb_sandbox *sb, const char *path, asb_buf *out, asb_write_fn sink,
                       void *user, const asb_call_opts *opts, asb_error *err);
    /* out is zeroed with its allocator set by the caller */
    asb_result (*list)(struct asb_sandbox *sb, const char *path, asb_file_list *out,
                       const asb_call_opts *opts, asb_error *err);
    asb_result (*exists)(struct asb_sandbox *sb, const char *path, int *exists,
                         const asb_call_opts *opts, asb_error *err);
    /* the calls only some runtimes have; NULL: ASB_ERR_UNSUPPORTED */
    asb_result (*stat)(struct asb_sandbox *sb, const char *path, asb_file_stat *out,
                       const asb_call_opts *opts, asb_error *err);
    asb_result (*delete_file)(struct asb_sandbox *sb, const char *path, int recursive,
                              const asb_call_opts *opts, asb_error *err);
    asb_result (*metadata)(struct asb_sandbox *sb, asb_buf *out, const asb_call_opts *opts,
                           asb_error *err);
    asb_result (*process_start)(struct asb_sandbox *sb, const asb_process_opts *opts,
                                asb_process **out, asb_error *err);
    /* run's env and cwd, write's file_mode: 1 when the runtime can */
    int has_run_env;
} asb__runtime;

/* One `kubectl port-forward <kind>/<name> :<port>...` (">>tunnel"): the
   connector that owns it fills the first block and keeps it. */
struct asb__tunnel {
    const char *kubectl, *kube_path, *kube_context; /* the client's */
    char *kube_env;       /* the client's (an environ entry: not const) */
    const asb_allocator *alloc;
    const asb_logger *log;
    const char *advice;   /* ends the message when kubectl cannot run */
    int ready_timeout_ms;
    const char *kind;     /* "svc" or "pod" */
    char name[254], ns[64];
    int nports, remote[2];
    /* the running kubectl, under the owner's lock */
    pid_t pid;            /* its supervisor; kubectl runs under it */
    int local[2];         /* where kubectl listens, per remote port */
    int ready;            /* kubectl said it listens on every local[] */
    int64_t t0;           /* when it was spawned */
    int err_fd;           /* kubectl's stderr, drained into err */
    int out_fd;           /* its stdout: the "Forwarding from" lines, then
                             one "Handling connection" line per connection
                             (read and dropped so kubectl never blocks) */
    char line[128];       /* the stdout line being read (bounded) */
    size_t line_len;
    int life_fd;          /* closes when this process ends, however it
                             ends: the supervisor then stops kubectl */
    char err[512];        /* its newest bytes, for error messages */
    size_t err_len;
};

struct asb_sandbox {
    struct asb_client *client;
    struct asb_sandbox *next;
    const asb__connector *conn; /* the client's, or the sandboxd one its
                                   mode pairs with */
    const asb__runtime *rt;     /* what serves this sandbox */
    int in_pod;                 /* asb_client_sandbox_in_pod's: no claim */
    pthread_mutex_t conn_lock;  /* the handle's own connection state below,
                                   held while kubectl comes up or a gRPC
                                   connection is made */
    asb__tunnel *tunnel;        /* sandboxd pod tunnel (NULL until used) */
    pthread_mutex_t h2_lock;    /* h2 and h2_old; taken before conn_lock */
    asb_h2_conn *h2;            /* sandboxd's gRPC connection (lazily) */
    asb_h2_conn **h2_old;       /* connections that broke while processes
                                   still had streams on them: freed with
                                   the handle */
    size_t h2_old_count;
    char claim[254]; /* a DNS-1123 subdomain: at most 253 bytes */
    char uid[64];   /* the claim's metadata.uid ("" if never seen): deletes
                       and re-attaches are pinned to it */
    int named;      /* the caller named the claim: theirs, so cleanup at
                       client free leaves it */
    char name[256];
    char ns[64];
    char pod[256];  /* from the Sandbox's pod-name annotation */
    char hash[64];  /* from its selector */
    int active;     /* the claim is ours and alive */
    int closed;     /* close_connection: no more calls, claim kept */
    char ip[ASB_IP_SIZE]; /* pod IP for calls (in-cluster, X-Sandbox-Pod-IP),
                             looked up once, as the reference does; "" after
                             a call that could not connect: looked up again */
    asb__span life;         /* the <service>.lifecycle span (life.t NULL:
                               none: tracing off, or ended) */
    const asb__span *trace_cur; /* the span of the call under way, whose
                               context goes out as traceparent */
};

struct asb_client {
    asb_allocator alloc;
    asb_kube_client *kube;
    asb_http_client *http;
    const asb__connector *conn; /* from asb_client_desc.mode */
    const asb__connector *sd_conn; /* the one a sandboxd handle uses with
                                      that mode; NULL: none can (routers) */
    asb_sandbox *in_pod;  /* asb_client_sandbox_in_pod's handle */
    char *direct_url;
    char *router_ns, *router_svc, *kubectl, *api_version;
    char *kube_path, *kube_context; /* handed to kubectl as the client's */
    char *kube_env;  /* "KUBECONFIG=a:b" for kubectl, from kubeconfig.paths */
    int router_port, server_port, pf_timeout_ms, cleanup;
    asb_runtime_kind runtime;
    int sd_rest_port, sd_grpc_port;
    char sd_rest_addr[300], sd_grpc_addr[300]; /* in-pod: "host:port" */
    asb_h2_desc h2_desc;  /* sandboxd gRPC connections: the client's limits */
    size_t max_output, max_read;
    char *router_auth;    /* "Bearer <token>" or NULL */
    asb_http_header *extra;
    size_t extra_count;
    int send_pod_ip;      /* asked for X-Sandbox-Pod-IP */
    int pod_ip_refused;   /* a lookup got 401/403: never asked again (under
                             lock; the header is off, in-cluster calls use
                             each sandbox's Service name) */
    char *gw_name, *gw_ns;
    int gw_timeout_ms, gw_port;
    int gw_https;         /* gw_base is https:// */
    char gw_base[300];    /* resolved once: http[s]://<address>:<port> */
    asb_logger log;
    pthread_mutex_t lock; /* the handle list and api_version; held briefly */
    pthread_mutex_t conn_lock; /* the connector's state (the tunnel,
                               gw_base); held while kubectl comes up or
                               the Gateway is watched, which is why it is
                               not `lock`: creates, lists and deletes on
                               other threads go on meanwhile */
    asb__tunnel tunnel;   /* the local tunnel's kubectl to the router */
    asb_portforward *native_pf; /* the native tunnel's forward to the
                               router (made once, under conn_lock) */
    struct asb__pod_forward *pod_pfs; /* the native tunnel's forwards to
                               sandboxd pods, one per pod and port (under
                               conn_lock) */
    asb_sandbox *handles;
    asb__tracer *tracer;  /* NULL: tracing off (see >>trace) */
};

/* >>tunnel ==================================================================
   One `kubectl port-forward` (asb__tunnel), owned by a connector: the
   local tunnel's one per client to the router Service. Started when the
   first claim is created (or on first use), under a supervisor process
   that stops it if this process dies; rebuilt when kubectl dies, stopped
   with SIGTERM then SIGKILL, always reaped. kubectl picks its own local
   port (`:<remote port>`) and the tunnel is ready when its stdout says
   "Forwarding from 127.0.0.1:<port> -> <remote port>": no port is chosen
   here and written into an argv every local user can read, and no
   listener is taken for the tunnel because it accepts a connection (an
   attacker who bound the port first would get the router token, the
   commands and the files, and could answer with any output). */

static char *asb__cdup(asb_client *c, const char *s) {
    size_t n;
    char *p;
    if (!s) return NULL;
    n = strlen(s);
    p = (char *)c->alloc.alloc_fn(n + 1, c->alloc.user_data);
    if (p) memcpy(p, s, n + 1);
    return p;
}

/* A stopped tunnel to kind/name in ns, on the client's kubectl settings
   (borrowed: the client outlives its tunnels). */
static void asb__tunnel_init(asb__tunnel *t, asb_client *c, const char *kind, const char *name,
                             const char *ns, const int *ports, int nports, const char *advice) {
    int i;
    memset(t, 0, sizeof *t);
    t->kubectl = c->kubectl;
    t->kube_path = c->kube_path;
    t->kube_context = c->kube_context;
    t->kube_env = c->kube_env;
    t->alloc = &c->alloc;
    t->log = &c->log;
    t->advice = advice;
    t->ready_timeout_ms = c->pf_timeout_ms;
    t->kind = kind;
    snprintf(t->name, sizeof t->name, "%.253s", name); /* a DNS name: 253 at most */
    snprintf(t->ns, sizeof t->ns, "%s", ns);
    t->nports = nports < 2 ? nports : 2;
    for (i = 0; i < t->nports; i++) t->remote[i] = ports[i];
    t->err_fd = t->out_fd = t->life_fd = -1;
}
static void asb__tunnel_stop_locked(asb__tunnel *t) {
    if (t->pid > 0) {
        int i, st;
        kill(-t->pid, SIGTERM);
        kill(t->pid, SIGTERM);
        for (i = 0; i < 100; i++) { /* 2 s */
            if (waitpid(t->pid, &st, WNOHANG) == t->pid) break;
            asb__sleep_ms(20);
        }
        if (i == 100) {
            kill(-t->pid, SIGKILL);
            kill(t->pid, SIGKILL);
            while (waitpid(t->pid, &st, 0) < 0 && errno == EINTR) {}
        }
    }
    if (t->err_fd >= 0) close(t->err_fd);
    t->err_fd = -1;
    if (t->out_fd >= 0) close(t->out_fd);
    t->out_fd = -1;
    t->line_len = 0;
    if (t->life_fd >= 0) close(t->life_fd);
    t->life_fd = -1;
    t->pid = 0;
    t->local[0] = t->local[1] = 0;
    t->ready = 0;
}

/* kubectl's stderr, drained into a small tail so a chatty kubectl never
   blocks on a full pipe, and kept for error messages. */
static void asb__tunnel_drain_locked(asb__tunnel *t) {
    char buf[512];
    ssize_t n;
    /* once ready, stdout holds only "Handling connection" lines: dropped
       (before, asb__tunnel_stdout_locked reads it line by line) */
    while (t->ready && t->out_fd >= 0 &&
           read(t->out_fd, buf, sizeof buf) > 0) {}
    while (t->err_fd >= 0 && (n = read(t->err_fd, buf, sizeof buf)) > 0) {
        size_t keep = sizeof t->err - 1, add = (size_t)n;
        if (add >= keep) { /* only the newest bytes fit */
            memcpy(t->err, buf + add - keep, keep);
            t->err_len = keep;
            continue;
        }
        if (t->err_len + add > keep) {
            size_t drop = t->err_len + add - keep;
            memmove(t->err, t->err + drop, t->err_len - drop);
            t->err_len -= drop;
        }
        memcpy(t->err + t->err_len, buf, add);
        t->err_len += add;
    }
}

/* What kubectl said last on stderr (bounded), for an error message. */
static void asb__tunnel_stderr(asb__tunnel *t, char *out, size_t cap) {
    size_t n;
    asb__tunnel_drain_locked(t);
    n = t->err_len;
    while (n > 0 && (t->err[n - 1] == '\n' || t->err[n - 1] == '\r')) n--;
    asb__quote(out, cap, t->err, n, 300);
}

/* Reads kubectl's stdout until its "Forwarding from 127.0.0.1:<port> ->
   <remote port>" line for every remote port: 1 with t->local[] set, 0
   when they have not all come yet, -1 with `why` filled when the output
   cannot be trusted: a line longer than t->line (kubectl's are short),
   or a "Forwarding from" line for another address, remote port or a
   port out of range. Other lines (a wrapper's notices) are passed over.
   Only this pipe, which only our kubectl writes, says where the tunnel
   is. */
static int asb__tunnel_stdout_locked(asb__tunnel *t, char *why, size_t cap) {
    char buf[256];
    ssize_t n;
    for (;;) {
        ssize_t i;
        if (t->out_fd < 0) return 0;
        n = read(t->out_fd, buf, sizeof buf);
        if (n == 0) { /* kubectl closed its stdout: no line will come */
            close(t->out_fd);
            t->out_fd = -1;
            return 0;
        }
        if (n < 0) return 0; /* nothing yet (EAGAIN), or EINTR: the next turn */
        for (i = 0; i < n; i++) {
            static const char pre[] = "Forwarding from 127.0.0.1:";
            char *ln = t->line, want[48];
            size_t len, k = sizeof pre - 1;
            long port = 0;
            int p, which = -1;
            if (buf[i] != '\n') {
                if (t->line_len >= sizeof t->line - 1) {
                    char q[96];
                    asb__quote(q, sizeof q, ln, t->line_len, 60);
                    snprintf(why, cap,
                             "kubectl printed a line longer than %d bytes on stdout "
                             "(\"%s\"), not its \"Forwarding from\" line",
                             (int)sizeof t->line - 1, q);
                    return -1;
                }
                ln[t->line_len++] = buf[i];
                continue;
            }
            len = t->line_len;
            t->line_len = 0;
            if (len > 0 && ln[len - 1] == '\r') len--;
            ln[len] = '\0';
            if (strncmp(ln, "Forwarding from ", 16) != 0) continue; /* not ours to read */
            if (len > k && strncmp(ln, pre, k) == 0)
                while (k < len && ln[k] >= '0' && ln[k] <= '9' && port <= 65535)
                    port = port * 10 + (ln[k++] - '0');
            for (p = 0; p < t->nports && port >= 1 && port <= 65535; p++) {
                snprintf(want, sizeof want, " -> %d", t->remote[p]);
                if (strcmp(ln + k, want) == 0) which = p;
            }
            if (which < 0) {
                char q[160];
                asb__quote(q, sizeof q, ln, len, 100);
                if (t->nports == 1)
                    snprintf(want, sizeof want, " -> %d", t->remote[0]);
                else
                    snprintf(want, sizeof want, " -> %d\" or \"... -> %d", t->remote[0],
                             t->remote[1]);
                snprintf(why, cap,
                         "kubectl's \"%s\" is not \"Forwarding from 127.0.0.1:<port>%s\"", q,
                         want);
                return -1;
            }
            t->local[which] = (int)port;
            for (p = 0; p < t->nports && t->local[p]; p++) {}
            if (p == t->nports) return 1;
        }
    }
    return 0;
}

static void asb__sv_noop(int sig) { (void)sig; }

/* The supervisor could not start kubectl: tell the parent why (it reads
   an errno from execfd) and leave. */
static void asb__sv_fail(int execfd) {
    int e = errno;
    ssize_t w = write(execfd, &e, sizeof e);
    (void)w;
    _exit(127);
}

/* The tunnel's supervisor: a fork of this process that never execs, so
   it makes only async-signal-safe calls (the program may have threads)
   and first drops everything of the program's it inherited: signal
   handlers (a copy of the program must never run the program's code)
   and descriptors. It starts kubectl in its own process group and waits
   for one of two things. kubectl exits: the supervisor exits with its
   status, so waitpid on the supervisor reports it. This process dies,
   however it dies (a crash, SIGKILL, Ctrl-C, exit without
   asb_client_free): the last write end of `life` closes, and the whole
   group (kubectl and anything a kubectl wrapper started) gets SIGTERM,
   then SIGKILL after 2 s. A parent-death signal would not do: kubectl
   dispatchers re-exec from a thread, which drops it. */
static void asb__tunnel_supervise(int life, int lifew, int errw, int outw, int execfd,
                                  const char *const *argv, char **envp) {
    struct sigaction sa;
    sigset_t none, chld;
    struct rlimit rl;
    pid_t k;
    int fd, st = 0, i, maxfd = 65536;
    /* signals arrive blocked (the parent blocked them around fork) */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_DFL;
    sigemptyset(&sa.sa_mask);
    for (i = 1; i < 65; i++) sigaction(i, &sa, NULL); /* SIGKILL/STOP/unknown: refused */
    setpgid(0, 0); /* one group: stopping the supervisor stops kubectl */
    close(lifew);  /* our copy of the write end must not keep `life` open */
    /* keep only our four descriptors, moved to 3, 4, 5 and 6 (select
       needs them low; nothing of the program's leaks into kubectl) */
    life = fcntl(life, F_DUPFD, 7);
    errw = fcntl(errw, F_DUPFD, 7);
    outw = fcntl(outw, F_DUPFD, 7);
    execfd = fcntl(execfd, F_DUPFD, 7);
    if (life < 0 || errw < 0 || outw < 0 || execfd < 0) _exit(127);
    if (dup2(life, 3) != 3 || dup2(errw, 4) != 4 || dup2(execfd, 5) != 5 ||
        dup2(outw, 6) != 6)
        asb__sv_fail(execfd);
    life = 3;
    errw = 4;
    execfd = 5;
    outw = 6;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur < (rlim_t)maxfd)
        maxfd = (int)rl.rlim_cur;
    for (fd = 7; fd < maxfd; fd++) close(fd);
    fcntl(execfd, F_SETFD, FD_CLOEXEC);
    sa.sa_handler = asb__sv_noop;
    sigaction(SIGCHLD, &sa, NULL);
    sigemptyset(&none);
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_SETMASK, &chld, NULL); /* SIGCHLD only inside pselect */
    k = fork();
    if (k < 0) asb__sv_fail(execfd);
    if (k == 0) {
        int devnull = open("/dev/null", O_RDWR);
        sa.sa_handler = SIG_DFL;
        sigaction(SIGCHLD, &sa, NULL);
        sigprocmask(SIG_SETMASK, &none, NULL); /* kubectl starts unmasked */
        if (devnull >= 0) dup2(devnull, 0);
        dup2(outw, 1);
        dup2(errw, 2);
        close(outw); /* on 1 and 2 now: kubectl needs no second copies */
        close(errw);
        close(life);
        if (envp) environ = envp; /* built before fork: only a pointer set here */
        execvp(argv[0], (char *const *)argv);
        asb__sv_fail(execfd);
    }
    close(errw);
    close(outw);
    close(execfd);
    for (;;) {
        fd_set rd;
        if (waitpid(k, &st, WNOHANG) == k)
            _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
        FD_ZERO(&rd);
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic push /* musl's FD_SET shifts by the int descriptor */
#pragma GCC diagnostic ignored "-Wsign-conversion"
#endif
        FD_SET(life, &rd);
#if defined(__GNUC__) || defined(__clang__)
#pragma GCC diagnostic pop
#endif
        /* SIGCHLD is blocked except inside pselect: none is lost */
        if (pselect(life + 1, &rd, NULL, NULL, NULL, &none) > 0) break;
    }
    /* the program is gone (EOF on life): stop the group, us last */
    sa.sa_handler = SIG_IGN;
    sigaction(SIGTERM, &sa, NULL);
    kill(0, SIGTERM);
    for (i = 0; i < 100; i++) {
        struct timespec ts = {0, 20000000L};
        if (waitpid(k, &st, WNOHANG) == k) break;
        nanosleep(&ts, NULL);
    }
    kill(0, SIGKILL); /* whatever is left, and the supervisor itself */
    _exit(0);
}

/* Starts kubectl port-forward and returns at once: create_sandbox spawns
   it before its claim watch, so kubectl starts while the controller works
   (~100-200 ms that would otherwise come after Ready). */
static asb_result asb__tunnel_spawn_locked(asb__tunnel *t, asb_error *err) {
    int pe[2], pf[2], po[2], child_errno = 0;
    char ports[2][16], target[300], **envp = NULL, kubectl[4096];
    const char *argv[16];
    int k = 0, p;
    pid_t pid;
    int life[2];
    sigset_t all, saved;
    /* found here, never in the working directory (execvp would take an
       empty PATH entry as that); the supervisor's child execs this path */
    child_errno = asb__find_executable(t->kubectl, kubectl, sizeof kubectl);
    if (child_errno)
        return asb__fail(err, ASB_ERR_KUBECTL_MISSING,
                         "port-forward: cannot run \"%s\": %s%s. Install kubectl, set "
                         "kubectl_path%s",
                         t->kubectl, strerror(child_errno),
                         strchr(t->kubectl, '/') ? "" : " (looked up in PATH only)", t->advice);
    /* no local port: kubectl binds one itself and says which */
    snprintf(target, sizeof target, "%s/%s", t->kind, t->name);
    argv[k++] = kubectl;
    argv[k++] = "port-forward";
    argv[k++] = target;
    for (p = 0; p < t->nports; p++) {
        snprintf(ports[p], sizeof ports[p], ":%d", t->remote[p]);
        argv[k++] = ports[p];
    }
    argv[k++] = "-n";
    argv[k++] = t->ns;
    argv[k++] = "--address";
    argv[k++] = "127.0.0.1";
    if (t->kube_path) {
        argv[k++] = "--kubeconfig";
        argv[k++] = t->kube_path;
    }
    if (t->kube_context) {
        argv[k++] = "--context";
        argv[k++] = t->kube_context;
    }
    argv[k] = NULL;
    if (t->kube_env) {
        /* asb_kubeconfig_desc.paths: kubectl merges them from its own
           KUBECONFIG (--kubeconfig takes one file); the program's
           environment is left as it is */
        size_t n = 0, j = 0;
        while (environ && environ[n]) n++;
        envp = (char **)t->alloc->alloc_fn((n + 2) * sizeof *envp, t->alloc->user_data);
        if (!envp) return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "port-forward: out of memory");
        for (n = 0; environ && environ[n]; n++)
            if (strncmp(environ[n], "KUBECONFIG=", 11) != 0) envp[j++] = environ[n];
        envp[j++] = t->kube_env;
        envp[j] = NULL;
    }
    if (asb__pipe_cloexec(pe) < 0) {
        if (envp) t->alloc->free_fn(envp, t->alloc->user_data);
        return asb__fail(err, ASB_ERR_IO, "port-forward: pipe: %s", strerror(errno));
    }
    if (asb__pipe_cloexec(pf) < 0) {
        close(pe[0]);
        close(pe[1]);
        if (envp) t->alloc->free_fn(envp, t->alloc->user_data);
        return asb__fail(err, ASB_ERR_IO, "port-forward: pipe: %s", strerror(errno));
    }
    if (asb__pipe_cloexec(po) < 0) {
        close(pe[0]);
        close(pe[1]);
        close(pf[0]);
        close(pf[1]);
        if (envp) t->alloc->free_fn(envp, t->alloc->user_data);
        return asb__fail(err, ASB_ERR_IO, "port-forward: pipe: %s", strerror(errno));
    }
    if (asb__pipe_cloexec(life) < 0) {
        close(pe[0]);
        close(pe[1]);
        close(pf[0]);
        close(pf[1]);
        close(po[0]);
        close(po[1]);
        if (envp) t->alloc->free_fn(envp, t->alloc->user_data);
        return asb__fail(err, ASB_ERR_IO, "port-forward: pipe: %s", strerror(errno));
    }
    /* the child must not run a signal handler of the program before it
       has reset them all: every signal blocked across fork */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &saved);
    pid = fork();
    if (pid == 0) /* no return */
        asb__tunnel_supervise(life[0], life[1], pe[1], po[1], pf[1], argv, envp);
    pthread_sigmask(SIG_SETMASK, &saved, NULL);
    if (envp) t->alloc->free_fn(envp, t->alloc->user_data);
    if (pid < 0) {
        close(pe[0]);
        close(pe[1]);
        close(pf[0]);
        close(pf[1]);
        close(po[0]);
        close(po[1]);
        close(life[0]);
        close(life[1]);
        return asb__fail(err, ASB_ERR_IO, "port-forward: fork: %s", strerror(errno));
    }
    setpgid(pid, pid); /* as the child does: no kill(-pid) can come too early */
    close(life[0]);
    close(pe[1]);
    close(pf[1]);
    close(po[1]);
    {
        ssize_t n;
        while ((n = read(pf[0], &child_errno, sizeof child_errno)) < 0 && errno == EINTR) {}
        if (n != (ssize_t)sizeof child_errno) child_errno = 0; /* EOF: kubectl runs */
    }
    close(pf[0]);
    t->pid = pid;
    t->life_fd = life[1];
    t->err_fd = pe[0];
    t->out_fd = po[0];
    t->line_len = 0;
    fcntl(pe[0], F_SETFL, fcntl(pe[0], F_GETFL) | O_NONBLOCK);
    fcntl(po[0], F_SETFL, fcntl(po[0], F_GETFL) | O_NONBLOCK);
    if (child_errno) {
        asb__tunnel_stop_locked(t);
        return asb__fail(err, ASB_ERR_KUBECTL_MISSING,
                         "port-forward: cannot run \"%s\": %s. Install kubectl, set "
                         "kubectl_path%s",
                         t->kubectl, strerror(child_errno), t->advice);
    }
    t->local[0] = t->local[1] = 0; /* until kubectl says */
    t->ready = 0;
    t->err_len = 0;
    t->t0 = asb__now_ms();
    return ASB_OK;
}

/* Waits until the spawned kubectl says where it listens (its stdout is
   polled, so the line is read as it comes; kubectl is usually up in
   100-200 ms), until port_forward_ready_timeout_ms. kubectl binds before
   it prints, and a bound port cannot be bound again by another user:
   the port it names is its own. */
static asb_result asb__tunnel_wait_locked(asb__tunnel *t, asb_error *err) {
    int64_t deadline = t->t0 + t->ready_timeout_ms;
    for (;;) {
        int st, got;
        int64_t left;
        char why[400];
        struct pollfd pfd;
        got = asb__tunnel_stdout_locked(t, why, sizeof why);
        if (got > 0) break;
        if (got < 0) {
            asb__tunnel_stop_locked(t);
            return asb__fail(err, ASB_ERR_PORT_FORWARD, "port-forward to %s/%s: %s",
                             t->ns, t->name, why);
        }
        if (waitpid(t->pid, &st, WNOHANG) == t->pid) {
            kill(-t->pid, SIGKILL); /* the supervisor died alone? its group */
            t->pid = 0;
            asb__tunnel_stderr(t, why, sizeof why);
            asb__tunnel_stop_locked(t);
            return asb__fail(err, ASB_ERR_PORT_FORWARD,
                             "port-forward to %s/%s exited (status %d): %s", t->ns,
                             t->name, WIFEXITED(st) ? WEXITSTATUS(st) : -1, why);
        }
        left = deadline - asb__now_ms();
        if (left <= 0) {
            asb__tunnel_stderr(t, why, sizeof why);
            asb__tunnel_stop_locked(t);
            return asb__fail(err, ASB_ERR_PORT_FORWARD,
                             "port-forward to %s/%s not ready within %d ms (no \"Forwarding "
                             "from\" line from kubectl): %s",
                             t->ns, t->name, t->ready_timeout_ms, why);
        }
        asb__tunnel_drain_locked(t);
        /* wakes when kubectl writes; 50 ms at most, to see it exit (its
           stdout at EOF is closed by the reader: poll skips fd -1) */
        pfd.fd = t->out_fd;
        pfd.events = POLLIN;
        pfd.revents = 0;
        poll(&pfd, 1, (int)(left < 50 ? left : 50));
    }
    t->ready = 1;
    asb__log(t->log, ASB_LOG_INFO, "tunnel.start",
             "kubectl port-forward %s/%s -n %s (pid %d) on 127.0.0.1:%d%s, ready in %lld ms",
             t->kind, t->name, t->ns, (int)t->pid, t->local[0], t->nports > 1 ? " and more" : "",
             (long long)(asb__now_ms() - t->t0));
    return ASB_OK;
}

/* The tunnel, up: kubectl reaped and started again if it died, then
   awaited until it listens. Under the owner's lock. */
static asb_result asb__tunnel_ensure_locked(asb__tunnel *t, asb_error *err) {
    asb_result r = ASB_OK;
    if (t->pid > 0) {
        int st;
        if (waitpid(t->pid, &st, WNOHANG) == t->pid) {
            if (t->log->fn) {
                char why[400];
                asb__tunnel_stderr(t, why, sizeof why);
                asb__log(t->log, ASB_LOG_WARN, "tunnel.exited",
                         "kubectl port-forward (pid %d) exited (%s %d): %s; starting a new one",
                         (int)t->pid, WIFEXITED(st) ? "status" : "signal",
                         WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), why);
            }
            kill(-t->pid, SIGKILL); /* the supervisor died alone? its group */
            t->pid = 0; /* kubectl died: reaped here, rebuilt below */
            asb__tunnel_stop_locked(t);
        }
    }
    if (t->pid <= 0) r = asb__tunnel_spawn_locked(t, err);
    if (r == ASB_OK && !t->ready) r = asb__tunnel_wait_locked(t, err);
    if (r == ASB_OK) asb__tunnel_drain_locked(t);
    return r;
}

/* >>connector: local tunnel =================================================
   ASB_CONNECT_LOCAL_TUNNEL, the default: one kubectl port-forward per
   client to the router Service (c->tunnel), started while the first
   claim's controller works, rebuilt when it died. */

static asb_result asb__lt_prestart(asb_client *c, asb_error *err) {
    /* No kubectl at all is worth failing for now, before waiting for
       Ready; any other failure to start shows on the first call, with its
       message. */
    asb_result r = ASB_OK;
    pthread_mutex_lock(&c->conn_lock);
    if (c->tunnel.pid <= 0) r = asb__tunnel_spawn_locked(&c->tunnel, err);
    pthread_mutex_unlock(&c->conn_lock);
    return r == ASB_ERR_KUBECTL_MISSING ? r : ASB_OK;
}

static asb_result asb__lt_endpoint(asb_client *c, asb_sandbox *sb, int port, asb__endpoint *ep,
                                   asb_error *err) {
    asb_result r;
    int was_up;
    (void)sb;
    (void)port; /* the router's port is forwarded; the sandbox's goes in a header */
    memset(ep, 0, sizeof *ep);
    ep->routed = 1;
    pthread_mutex_lock(&c->conn_lock);
    was_up = c->tunnel.pid > 0 && c->tunnel.ready;
    r = asb__tunnel_ensure_locked(&c->tunnel, err);
    if (!was_up) /* kubectl's start (spawned here or at the create) to listening */
        asb__latency_ms(c->tracer, ASB_LATENCY_TUNNEL_START, r != ASB_OK,
                        asb__now_ms() - c->tunnel.t0);
    if (r == ASB_OK) snprintf(ep->base, sizeof ep->base, "http://127.0.0.1:%d", c->tunnel.local[0]);
    pthread_mutex_unlock(&c->conn_lock);
    return r;
}

static asb_result asb__lt_reconnect(asb_client *c, asb_sandbox *sb, int port, int resendable,
                                    asb__endpoint *ep, int *again, asb_error *err) {
    /* never reached anything: the tunnel may have died; rebuild, once */
    asb_result r = asb__lt_endpoint(c, sb, port, ep, err);
    (void)resendable;
    *again = r == ASB_OK;
    return r;
}

static void asb__lt_stop(asb_client *c) {
    pthread_mutex_lock(&c->conn_lock);
    asb__tunnel_stop_locked(&c->tunnel);
    pthread_mutex_unlock(&c->conn_lock);
}

static const asb__connector asb__connector_local_tunnel = {
    "the local tunnel", 1, 1, NULL, asb__lt_prestart, asb__lt_endpoint, asb__lt_reconnect,
    asb__lt_stop, NULL, NULL, NULL, NULL};

/* >>connector: direct =======================================================
   ASB_CONNECT_DIRECT: a router URL the caller can reach (direct_url). */

/* The longest direct_url taken (the base URL buffer of a call is 600). */
#define ASB__DIRECT_URL_MAX 512

static asb_result asb__direct_check(const asb_client_desc *desc, asb_error *err) {
    asb_url u;
    asb_result r;
    if (!desc->direct_url)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "client: ASB_CONNECT_DIRECT needs direct_url");
    r = asb_url_parse(desc->direct_url, strlen(desc->direct_url), &u, err);
    if (r != ASB_OK) return r;
    /* each call copies it into a fixed buffer (asb__endpoint): a longer
       one would be cut, sending calls to a shorter URL than asked */
    if (strlen(desc->direct_url) > ASB__DIRECT_URL_MAX)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "client: direct_url is longer than %d bytes", ASB__DIRECT_URL_MAX);
#if !ASB_TLS
    if (u.is_https)
        return asb__fail(err, ASB_ERR_TLS_UNAVAILABLE,
                         "client: direct_url is https but this build has no TLS (ASB_TLS 0)");
#endif
    return ASB_OK;
}

static asb_result asb__direct_endpoint(asb_client *c, asb_sandbox *sb, int port,
                                       asb__endpoint *ep, asb_error *err) {
    (void)sb;
    (void)port;
    memset(ep, 0, sizeof *ep);
    ep->routed = 1;
    if ((size_t)snprintf(ep->base, sizeof ep->base, "%s", c->direct_url) >= sizeof ep->base)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "client: direct_url too long");
    return ASB_OK;
}

static const asb__connector asb__connector_direct = {
    "direct_url", 1, 0, asb__direct_check, NULL, asb__direct_endpoint, NULL, NULL, NULL, NULL,
    NULL, NULL};

/* >>connector: gateway ======================================================
   ASB_CONNECT_GATEWAY: the router behind a Gateway, whose address is
   watched for once and kept (c->gw_base). */
/* The Gateway watch: the first valid address wins; invalid ones (paths,
   numeric forms, ...) are skipped, as upstream learned to. */
typedef struct asb__gw_wait {
    char addr[256];
    int skipped;
    const asb_logger *log;
} asb__gw_wait;

static int asb__gw_event(void *ud, const asb_watch_event *ev) {
    asb__gw_wait *g = (asb__gw_wait *)ud;
    asb_json_iter it;
    int a;
    if (ev->type != ASB_WATCH_ADDED && ev->type != ASB_WATCH_MODIFIED) return 0;
    it = asb_json_iter_begin(ev->doc, asb_json_find(ev->doc, ev->object, "status.addresses"));
    while (asb_json_iter_next(ev->doc, &it, NULL, &a)) {
        char v[256];
        size_t n = 0;
        if (asb_json_get_string(ev->doc, asb_json_member(ev->doc, a, "value", 5), v, sizeof v,
                                &n) != ASB_OK ||
            n != strlen(v) || asb_gateway_address_validate(v, n, NULL) != ASB_OK) {
            char q[160];
            asb__quote(q, sizeof q, v, n, 100);
            asb__log(g->log, ASB_LOG_WARN, "gateway.address_rejected",
                     "gateway address \"%s\" is not an IP or a plain host name: skipped", q);
            g->skipped++;
            continue;
        }
        snprintf(g->addr, sizeof g->addr, "%s", v);
        return 1;
    }
    return 0;
}

static asb_result asb__gateway_base(asb_client *c, asb_error *err) {
    static const asb_kube_resource gws = {"gateway.networking.k8s.io", "v1", "gateways"};
    asb__gw_wait g;
    asb_watch_opts wo;
    char sel[128];
    asb_result r;
    memset(&g, 0, sizeof g);
    g.log = &c->log;
    memset(&wo, 0, sizeof wo);
    snprintf(sel, sizeof sel, "metadata.name=%s", c->gw_name);
    wo.field_selector = sel;
    wo.deadline_ms = c->gw_timeout_ms;
    r = asb_kube_watch(c->kube, &gws, c->gw_ns, &wo, asb__gw_event, &g, err);
    if (r == ASB_ERR_TIMEOUT)
        return asb__fail(err, ASB_ERR_TIMEOUT,
                         "gateway %s/%s has no valid address after %d ms (%d invalid skipped)",
                         c->gw_ns, c->gw_name, c->gw_timeout_ms, g.skipped);
    if (r != ASB_OK) return r;
    snprintf(c->gw_base, sizeof c->gw_base, strchr(g.addr, ':') ? "%s://[%s]:%d" : "%s://%s:%d",
             c->gw_https ? "https" : "http", g.addr, c->gw_port);
    asb__log(&c->log, ASB_LOG_INFO, "gateway.address", "gateway %s/%s: using %s", c->gw_ns,
             c->gw_name, c->gw_base);
    return ASB_OK;
}

static asb_result asb__gw_check(const asb_client_desc *desc, asb_error *err) {
    if (!desc->gateway_name)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "client: ASB_CONNECT_GATEWAY needs gateway_name");
    if (asb_dns_label_validate(desc->gateway_name, strlen(desc->gateway_name), err) != ASB_OK ||
        (desc->gateway_namespace &&
         asb_dns_label_validate(desc->gateway_namespace, strlen(desc->gateway_namespace), err) !=
             ASB_OK))
        return ASB_ERR_INVALID_ARGUMENT;
    return ASB_OK;
}

static asb_result asb__gw_endpoint(asb_client *c, asb_sandbox *sb, int port, asb__endpoint *ep,
                                   asb_error *err) {
    asb_result r = ASB_OK;
    (void)sb;
    (void)port;
    memset(ep, 0, sizeof *ep);
    ep->routed = 1;
    pthread_mutex_lock(&c->conn_lock);
    if (!c->gw_base[0]) {
        int64_t t0 = asb__now_ms();
        r = asb__gateway_base(c, err);
        asb__latency_ms(c->tracer, ASB_LATENCY_GATEWAY_DISCOVERY, r != ASB_OK, asb__now_ms() - t0);
    }
    if (r == ASB_OK) snprintf(ep->base, sizeof ep->base, "%s", c->gw_base);
    pthread_mutex_unlock(&c->conn_lock);
    return r;
}

static const asb__connector asb__connector_gateway = {
    "the Gateway", 1, 0, asb__gw_check, NULL, asb__gw_endpoint, NULL, NULL, NULL, NULL, NULL,
    NULL};

/* >>connector: in-cluster ===================================================
   ASB_CONNECT_IN_CLUSTER: from a pod straight to the sandbox pod, no
   router: http://<pod IP>:<port>, the IP looked up once per handle (and
   again when it refuses), else the sandbox's Service name. */

static asb_result asb__sb_cached_ip(asb_sandbox *sb, asb_error *err);
static int asb__pod_ip_refused(asb_client *c, const asb_error *lookup_err, const char *then);

static asb_result asb__ic_endpoint(asb_client *c, asb_sandbox *sb, int port, asb__endpoint *ep,
                                   asb_error *err) {
    asb_error ierr;
    int cached = sb->ip[0] != '\0';
    (void)err;
    memset(ep, 0, sizeof *ep);
    memset(&ierr, 0, sizeof ierr);
    if (!asb__pod_ip_refused(c, NULL, NULL) && asb__sb_cached_ip(sb, &ierr) == ASB_OK) {
        snprintf(ep->base, sizeof ep->base,
                 strchr(sb->ip, ':') ? "http://[%s]:%d" : "http://%s:%d", sb->ip, port);
        ep->maybe_stale = cached; /* it may be stale */
        ep->by_pod_ip = 1;
        return ASB_OK;
    }
    asb__pod_ip_refused(c, &ierr, "in-cluster calls go to each sandbox's Service name from now on");
    /* <sandbox>.<namespace>.svc.cluster.local: a headless Service the
       controller makes when the template says `service: true` */
    snprintf(ep->base, sizeof ep->base, "http://%s.%s.svc.cluster.local:%d", sb->name, sb->ns,
             port);
    return ASB_OK;
}

static asb_result asb__ic_reconnect(asb_client *c, asb_sandbox *sb, int port, int resendable,
                                    asb__endpoint *ep, int *again, asb_error *err) {
    /* the pod may have moved: a call that never connected to its IP looks
       it up again right now, once (the caller forgot the cached one) */
    *again = ep->by_pod_ip && resendable;
    return *again ? asb__ic_endpoint(c, sb, port, ep, err) : ASB_OK;
}

static const asb__connector asb__connector_in_cluster = {
    "in-cluster", 0, 0, NULL, NULL, asb__ic_endpoint, asb__ic_reconnect, NULL, NULL,
    " (in-cluster without a pod IP: the sandbox's Service name, which exists when its "
    "template says service: true)",
    NULL, NULL};

/* >>connector: native tunnel ===============================================
   ASB_CONNECT_NATIVE_TUNNEL: the router Service reached through the
   apiserver's port-forward from inside this process (">>portforward"):
   every connection of the client's HTTP client is one WebSocket stream
   to the router pod, dialled by asb_portforward_dial. Nothing is
   spawned; the Service is resolved at the first call and again after a
   stream fails (a pod that died or moved). A stream that dies under a
   call fails that call, with the stream's error in the message. */

static void asb__error_hint(asb_error *err, const char *hint);

/* The forward, made at first use (no I/O until a dial). */
static asb_result asb__nt_forward(asb_client *c, asb_portforward **out, asb_error *err) {
    asb_result r = ASB_OK;
    pthread_mutex_lock(&c->conn_lock);
    if (!c->native_pf) {
        asb_portforward_desc d;
        char port[16];
        snprintf(port, sizeof port, "%d", c->router_port);
        memset(&d, 0, sizeof d);
        d.ns = c->router_ns;
        d.service = c->router_svc;
        d.port = port;
        d.timeout_ms = c->pf_timeout_ms;
        d.log = &c->log;
        r = asb_portforward_create(c->kube, &d, &c->native_pf, err);
    }
    *out = c->native_pf;
    pthread_mutex_unlock(&c->conn_lock);
    return r;
}

static asb_result asb__nt_prestart(asb_client *c, asb_error *err) {
    asb_portforward *pf;
    return asb__nt_forward(c, &pf, err);
}

static asb_result asb__nt_endpoint(asb_client *c, asb_sandbox *sb, int port, asb__endpoint *ep,
                                   asb_error *err) {
    (void)sb;
    (void)port; /* the router's port is forwarded; the sandbox's goes in a header */
    (void)err;
    memset(ep, 0, sizeof *ep);
    ep->routed = 1;
    /* the host only names the Service in Host: (connections are dialled) */
    snprintf(ep->base, sizeof ep->base, "http://%s.%s:%d", c->router_svc, c->router_ns,
             c->router_port);
    return ASB_OK;
}

static asb_result asb__client_dial(void *user, const char *host, int port, int *fd,
                                   asb_error *err);

/* A forward to one port of one sandboxd pod ("<pod>.<ns>" in the URL). */
typedef struct asb__pod_forward {
    char host[320];
    int port;
    asb_portforward *pf;
    struct asb__pod_forward *next;
} asb__pod_forward;

static asb_result asb__nt_pod_forward(asb_client *c, const char *host, int port,
                                      asb_portforward **out, asb_error *err) {
    asb__pod_forward *f;
    asb_result r = ASB_OK;
    pthread_mutex_lock(&c->conn_lock);
    for (f = c->pod_pfs; f && (f->port != port || strcmp(f->host, host) != 0); f = f->next) {}
    if (!f) {
        asb_portforward_desc d;
        char pod[254], ns[64], pnum[16];
        const char *dot = strchr(host, '.');
        memset(&d, 0, sizeof d);
        if (!dot || (size_t)(dot - host) >= sizeof pod || strlen(dot + 1) >= sizeof ns ||
            strlen(host) >= sizeof f->host) {
            pthread_mutex_unlock(&c->conn_lock);
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "native tunnel: bad pod host");
        }
        snprintf(pod, sizeof pod, "%.*s", (int)(dot - host), host);
        snprintf(ns, sizeof ns, "%s", dot + 1);
        snprintf(pnum, sizeof pnum, "%d", port);
        d.ns = ns;
        d.pod = pod;
        d.port = pnum;
        d.timeout_ms = c->pf_timeout_ms;
        d.log = &c->log;
        f = (asb__pod_forward *)c->alloc.alloc_fn(sizeof *f, c->alloc.user_data);
        if (!f) r = asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "native tunnel: out of memory");
        if (f) {
            memset(f, 0, sizeof *f);
            snprintf(f->host, sizeof f->host, "%s", host);
            f->port = port;
            r = asb_portforward_create(c->kube, &d, &f->pf, err);
            if (r != ASB_OK) {
                c->alloc.free_fn(f, c->alloc.user_data);
                f = NULL;
            } else {
                f->next = c->pod_pfs;
                c->pod_pfs = f;
            }
        }
    }
    *out = f ? f->pf : NULL;
    pthread_mutex_unlock(&c->conn_lock);
    return r;
}

static asb_result asb__nt_dial(asb_client *c, const char *host, int port, int *fd,
                               asb_error *err) {
    asb_portforward *pf = NULL; /* set on ASB_OK; gcc cannot always tell */
    asb_result r;
    char router[200];
    snprintf(router, sizeof router, "%s.%s", c->router_svc, c->router_ns);
    /* the router's Service, or a sandboxd pod ("<pod>.<ns>", the pod tunnel) */
    r = strcmp(host, router) == 0 ? asb__nt_forward(c, &pf, err)
                                  : asb__nt_pod_forward(c, host, port, &pf, err);
    if (r != ASB_OK) return r;
    r = asb_portforward_dial(pf, fd, err); /* outside conn_lock: threads dial at once */
    if (r == ASB_ERR_KUBE_API && err && err->http_status == 403)
        asb__error_hint(err, " (the native tunnel needs get or create on pods/portforward, and "
                             "get/list on services and pods, in the router's namespace)");
    return r;
}

static void asb__nt_explain(asb_client *c, asb_result r, asb_error *err) {
    asb_portforward *pf;
    asb_error e;
    char hint[ASB_ERROR_MESSAGE_SIZE];
    pthread_mutex_lock(&c->conn_lock);
    pf = c->native_pf;
    pthread_mutex_unlock(&c->conn_lock);
    if (!pf || (r != ASB_ERR_RECV && r != ASB_ERR_SEND && r != ASB_ERR_HTTP_PROTOCOL &&
                r != ASB_ERR_HTTP_SHORT_BODY))
        return;
    if (asb_portforward_take_error(pf, &e)) {
        snprintf(hint, sizeof hint, " (%.300s; the next call resolves the router again)",
                 e.message);
        asb__error_hint(err, hint);
    }
}

static void asb__nt_stop(asb_client *c) {
    pthread_mutex_lock(&c->conn_lock);
    asb_portforward_free(c->native_pf); /* ends the streams, joins their relays */
    c->native_pf = NULL;
    while (c->pod_pfs) {
        asb__pod_forward *f = c->pod_pfs;
        c->pod_pfs = f->next;
        asb_portforward_free(f->pf);
        c->alloc.free_fn(f, c->alloc.user_data);
    }
    pthread_mutex_unlock(&c->conn_lock);
}

/* The sandboxd runtime in native mode: sandboxd listens on its pod's
   loopback, where no router reaches, so each of its ports is
   port-forwarded to the pod itself (as the sandboxd pod tunnel does with
   kubectl), "<pod>.<ns>" naming it for the dial. */
static asb_result asb__npt_endpoint(asb_client *c, asb_sandbox *sb, int port, asb__endpoint *ep,
                                    asb_error *err) {
    (void)c;
    memset(ep, 0, sizeof *ep);
    if (!sb) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "native pod tunnel: no sandbox");
    if (asb_claim_name_validate(sb->pod, strlen(sb->pod), NULL) != ASB_OK)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "sandbox %s: its pod name \"%.60s\" is not an object name", sb->name,
                         sb->pod);
    snprintf(ep->base, sizeof ep->base, "http://%s.%s:%d", sb->pod, sb->ns, port);
    return ASB_OK;
}

/* The handle is done: its pod's forwards go (their streams end). */
static void asb__npt_release(asb_sandbox *sb) {
    asb_client *c = sb->client;
    asb__pod_forward **pp, *gone = NULL;
    char host[320];
    snprintf(host, sizeof host, "%s.%s", sb->pod, sb->ns);
    pthread_mutex_lock(&c->conn_lock);
    for (pp = &c->pod_pfs; *pp;) {
        if (strcmp((*pp)->host, host) == 0) {
            asb__pod_forward *f = *pp;
            *pp = f->next;
            f->next = gone;
            gone = f;
        } else {
            pp = &(*pp)->next;
        }
    }
    pthread_mutex_unlock(&c->conn_lock);
    while (gone) {
        asb__pod_forward *f = gone;
        gone = f->next;
        asb_portforward_free(f->pf);
        c->alloc.free_fn(f, c->alloc.user_data);
    }
}

static const asb__connector asb__connector_native_tunnel = {
    "the native tunnel", 1, 0, NULL, asb__nt_prestart, asb__nt_endpoint, NULL, asb__nt_stop, NULL,
    NULL, asb__nt_dial, asb__nt_explain};

static const asb__connector asb__connector_native_pod_tunnel = {
    "the native pod tunnel", 0, 0, NULL, NULL, asb__npt_endpoint, NULL, asb__nt_stop,
    asb__npt_release, NULL, asb__nt_dial, asb__nt_explain};


/* >>connector: sandboxd pod tunnel ==========================================
   The sandboxd runtime with ASB_CONNECT_LOCAL_TUNNEL. sandboxd listens on
   the pod's loopback, where no router reaches, so each sandbox gets its
   own `kubectl port-forward pod/<pod> :<rest> :<grpc>` (as the Python SDK
   1.0.8 does): started on the handle's first call, shared by all its
   calls, rebuilt when kubectl dies, stopped with the handle. */

static asb_result asb__pt_endpoint(asb_client *c, asb_sandbox *sb, int port, asb__endpoint *ep,
                                   asb_error *err) {
    asb_result r = ASB_OK;
    int i;
    memset(ep, 0, sizeof *ep);
    if (!sb) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "sandboxd pod tunnel: no sandbox");
    /* the pod name goes into kubectl's argv: an object name, never an option */
    if (asb_claim_name_validate(sb->pod, strlen(sb->pod), NULL) != ASB_OK)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "sandbox %s: its pod name \"%.60s\" is not an object name", sb->name,
                         sb->pod);
    pthread_mutex_lock(&sb->conn_lock);
    if (!sb->tunnel) {
        int ports[2];
        ports[0] = c->sd_rest_port;
        ports[1] = c->sd_grpc_port;
        sb->tunnel = (asb__tunnel *)c->alloc.alloc_fn(sizeof *sb->tunnel, c->alloc.user_data);
        if (!sb->tunnel)
            r = asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "sandboxd pod tunnel: out of memory");
        else
            asb__tunnel_init(sb->tunnel, c, "pod", sb->pod, sb->ns, ports, 2,
                             ", or run in the cluster (ASB_CONNECT_IN_CLUSTER)");
    }
    if (r == ASB_OK) r = asb__tunnel_ensure_locked(sb->tunnel, err);
    if (r == ASB_OK) {
        for (i = 0; i < 2 && sb->tunnel->remote[i] != port; i++) {}
        if (i == 2)
            r = asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "sandboxd pod tunnel: port %d is not forwarded",
                          port);
        else
            snprintf(ep->base, sizeof ep->base, "http://127.0.0.1:%d", sb->tunnel->local[i]);
    }
    pthread_mutex_unlock(&sb->conn_lock);
    return r;
}

static asb_result asb__pt_reconnect(asb_client *c, asb_sandbox *sb, int port, int resendable,
                                    asb__endpoint *ep, int *again, asb_error *err) {
    /* never reached anything: kubectl may have died; rebuilt, once */
    asb_result r = asb__pt_endpoint(c, sb, port, ep, err);
    (void)resendable;
    *again = r == ASB_OK;
    return r;
}

static void asb__pt_release(asb_sandbox *sb) {
    pthread_mutex_lock(&sb->conn_lock);
    if (sb->tunnel) {
        asb__tunnel_stop_locked(sb->tunnel);
        sb->client->alloc.free_fn(sb->tunnel, sb->client->alloc.user_data);
        sb->tunnel = NULL;
    }
    pthread_mutex_unlock(&sb->conn_lock);
}

static const asb__connector asb__connector_pod_tunnel = {
    "the sandboxd pod tunnel", 0, 1, NULL, NULL, asb__pt_endpoint, asb__pt_reconnect, NULL,
    asb__pt_release, NULL, NULL, NULL};

/* >>connector: in-pod ========================================================
   ASB_CONNECT_IN_POD: a program beside sandboxd in its pod (the sidecar
   layout of sandboxd's user guide) reaches it on the loopback addresses
   the pod declares, SANDBOXD_REST_ADDR and SANDBOXD_GRPC_ADDR; no
   Kubernetes API, no claim, one handle (asb_client_sandbox_in_pod). */

/* "host:port" as the base URL it names, checked as a URL. */
static asb_result asb__in_pod_addr(const char *given, const char *env_name, char *out, size_t cap,
                                   asb_error *err) {
    const char *a = given ? given : getenv(env_name);
    asb_url u;
    if (!a || !*a)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "client: ASB_CONNECT_IN_POD needs sandboxd's address: set %s in the "
                         "environment (as sandboxd's pod declares it) or in asb_client_desc",
                         env_name);
    if (strstr(a, "://") || !strchr(a, ':') ||
        (size_t)snprintf(out, cap, "http://%s", a) >= cap ||
        asb_url_parse(out, strlen(out), &u, NULL) != ASB_OK) {
        char q[120];
        asb__quote(q, sizeof q, a, strlen(a), 80);
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "client: %s \"%s\" is not host:port", env_name, q);
    }
    return ASB_OK;
}

static asb_result asb__in_pod_check(const asb_client_desc *d, asb_error *err) {
    char tmp[300];
    asb_result r = asb__in_pod_addr(d->sandboxd_rest_addr, "SANDBOXD_REST_ADDR", tmp, sizeof tmp,
                                    err);
    if (r == ASB_OK)
        r = asb__in_pod_addr(d->sandboxd_grpc_addr, "SANDBOXD_GRPC_ADDR", tmp, sizeof tmp, err);
    return r;
}

static asb_result asb__in_pod_endpoint(asb_client *c, asb_sandbox *sb, int port,
                                       asb__endpoint *ep, asb_error *err) {
    (void)sb;
    (void)err;
    memset(ep, 0, sizeof *ep);
    snprintf(ep->base, sizeof ep->base, "%s",
             port == c->sd_grpc_port ? c->sd_grpc_addr : c->sd_rest_addr);
    return ASB_OK;
}

static const asb__connector asb__connector_in_pod = {
    "in-pod", 0, 0, asb__in_pod_check, NULL, asb__in_pod_endpoint, NULL, NULL, NULL, NULL, NULL,
    NULL};

/* The one dispatch on asb_client_desc.mode: the connector of a mode for
   the legacy runtime (sandboxd 0) or for sandboxd (1). NULL: an unknown
   mode, or one that cannot reach that runtime (sandboxd sits beyond any
   router; in-pod has only sandboxd). */
static const asb__connector *asb__connector_of(asb_connection_mode mode, int sandboxd) {
    switch (mode) {
    case ASB_CONNECT_LOCAL_TUNNEL:
        return sandboxd ? &asb__connector_pod_tunnel : &asb__connector_local_tunnel;
    case ASB_CONNECT_DIRECT: return sandboxd ? NULL : &asb__connector_direct;
    case ASB_CONNECT_GATEWAY: return sandboxd ? NULL : &asb__connector_gateway;
    case ASB_CONNECT_IN_CLUSTER: return &asb__connector_in_cluster;
    case ASB_CONNECT_NATIVE_TUNNEL:
        return sandboxd ? &asb__connector_native_pod_tunnel : &asb__connector_native_tunnel;
    case ASB_CONNECT_IN_POD: return sandboxd ? &asb__connector_in_pod : NULL;
    }
    return NULL;
}

/* >>runtime: legacy ========================================================
   The runtime the agent-sandbox examples ship (and tools/runtime): an
   HTTP/1.1 JSON API on server_port (8888), reached through any
   connector: POST /execute, POST /upload (multipart), GET /download/<path>,
   GET /list/<path>, GET /exists/<path>, GET / as the readiness probe. */

static asb_result asb__sb_call(asb_sandbox *sb, asb_http_request *req, const char *path,
                               int timeout_ms, asb_http_response *resp, asb_error *err);
static asb_result asb__sb_call_port(asb_sandbox *sb, int server_port, asb_http_request *req,
                                    const char *path, int timeout_ms, asb_http_response *resp,
                                    asb_error *err);
static void asb__client_mask_error(const asb_client *c, asb_error *err);

/* opts.probe_runtime: Ready by the controller need not mean the runtime
   answers (a template without a readiness probe: the server may still be
   starting, or the router may not have the new pod): probe GET / until
   anything but a 5xx or a connection failure comes back, or the
   deadline. Any answer at all means the server is up.
   route_only (every create through a router): the Go sandbox-router finds
   pods in a cache its own pod watch fills, which can learn of the Ready
   pod after the claim's watch did; a request it cannot place meets a 502
   (after its DNS fallback and dial retries), and the first call is often
   a POST that must not be sent twice. So GET / (idempotent) is sent
   until the router places it: only its 502/503/504 are waited out; any
   other answer or failure is the first call's to report, as before. */
static asb_result asb__legacy_probe(asb_sandbox *sb, int64_t deadline, const asb_cancel *cancel,
                                    int route_only, asb_error *err) {
    int64_t pause = 50;
    for (;;) {
        asb_http_request req;
        asb_http_response resp;
        asb_retry_policy once;
        asb_result r;
        memset(&req, 0, sizeof req);
        memset(&once, 0, sizeof once);
        once.max_attempts = 1;
        req.retry = &once;
        req.cancel = cancel;
        r = asb__sb_call(sb, &req, "/", 0, &resp, err);
        if (r == ASB_OK || r == ASB_ERR_NOT_FOUND ||
            (r == ASB_ERR_HTTP_STATUS && resp.status < 500) ||
            (route_only && (r != ASB_ERR_HTTP_STATUS || resp.status < 502 || resp.status > 504))) {
            asb_http_response_free(&resp);
            return ASB_OK;
        }
        asb_http_response_free(&resp);
        if (r != ASB_ERR_HTTP_STATUS && r != ASB_ERR_CONNECT && r != ASB_ERR_RECV &&
            r != ASB_ERR_SEND)
            return r; /* not "still starting" (a timeout already spent its wait) */
        if (asb__now_ms() + pause >= deadline)
            return asb__fail(err, ASB_ERR_TIMEOUT,
                             route_only ? "sandbox %s is Ready but the router could not reach it "
                                          "in time (%s)"
                                        : "sandbox %s is Ready but its runtime did not answer "
                                          "in time (%s)",
                             sb->name, asb_result_str(r));
        if (asb__sleep_or_cancel(pause, cancel))
            return asb__fail(err, ASB_ERR_CANCELLED, "sandbox %s: cancelled while probing its runtime",
                             sb->name);
        if (pause < 1000) pause *= 2;
    }
}

/* The runtime's answers (untrusted bytes from the sandbox side): decoded
   apart from the calls so they can be fuzzed without a peer. */

/* {"stdout": s, "stderr": s, "exit_code": n}: all or nothing. An exit code
   outside int (a process's code is 0-255, or minus a signal) is refused
   rather than cut: 4294967296 must not read as 0, success. */
static asb_result asb__run_answer_decode(const char *body, size_t len, const asb_allocator *a,
                                         asb_run_result *result) {
    asb_json_doc d;
    int64_t code = 0;
    asb_result r = ASB_ERR_HTTP_PROTOCOL;
    result->out.len = result->err.len = 0;
    if (asb_json_doc_parse(&d, body ? body : "", len, a, NULL) != ASB_OK) return r;
    if (asb_json_append_string(&d, asb_json_find(&d, 0, "stdout"), &result->out) == ASB_OK &&
        asb_json_append_string(&d, asb_json_find(&d, 0, "stderr"), &result->err) == ASB_OK &&
        asb_json_get_int64(&d, asb_json_find(&d, 0, "exit_code"), &code) == ASB_OK &&
        code >= INT_MIN && code <= INT_MAX) {
        result->exit_code = (int)code;
        r = ASB_OK;
    }
    asb_json_doc_free(&d);
    return r;
}

/* {"exists": bool} */
static asb_result asb__exists_answer_decode(const char *body, size_t len, const asb_allocator *a,
                                            int *exists) {
    asb_json_doc d;
    asb_result r;
    *exists = 0;
    if (asb_json_doc_parse(&d, body ? body : "", len, a, NULL) != ASB_OK)
        return ASB_ERR_HTTP_PROTOCOL;
    r = asb_json_get_bool(&d, asb_json_find(&d, 0, "exists"), exists) == ASB_OK
            ? ASB_OK
            : ASB_ERR_HTTP_PROTOCOL;
    asb_json_doc_free(&d);
    return r;
}

/* [{"name": s, "size": n, "mod_time": x, "type": "directory"|...}, ...];
   an entry without a string name is skipped. out->alloc_ is set. */
static asb_result asb__list_answer_decode(const char *body, size_t len, asb_file_list *out) {
    asb_json_doc d;
    asb_json_iter it;
    int item;
    asb_result r = ASB_OK;
    if (asb_json_doc_parse(&d, body ? body : "", len, &out->alloc_, NULL) != ASB_OK)
        return ASB_ERR_HTTP_PROTOCOL;
    if (d.toks[0].type != ASB_JSON_ARRAY) {
        asb_json_doc_free(&d);
        return ASB_ERR_HTTP_PROTOCOL;
    }
    out->entries = (asb_file_entry *)out->alloc_.alloc_fn(
        ((size_t)d.toks[0].size + 1) * sizeof(asb_file_entry), out->alloc_.user_data);
    if (!out->entries) r = ASB_ERR_OUT_OF_MEMORY;
    it = asb_json_iter_begin(&d, 0);
    while (r == ASB_OK && asb_json_iter_next(&d, &it, NULL, &item)) {
        asb_file_entry *e = &out->entries[out->count];
        asb_buf name;
        int64_t size = 0;
        memset(e, 0, sizeof *e);
        asb_buf_init(&name, &out->alloc_);
        if (asb_json_append_string(&d, asb_json_member(&d, item, "name", 4), &name) != ASB_OK) {
            asb_buf_free(&name);
            continue; /* an entry without a name is skipped */
        }
        e->name = name.ptr;
        asb_json_get_int64(&d, asb_json_member(&d, item, "size", 4), &size);
        e->size = size > 0 ? (uint64_t)size : 0;
        asb_json_get_double(&d, asb_json_member(&d, item, "mod_time", 8), &e->mod_time);
        e->is_dir = asb_json_string_eq(&d, asb_json_member(&d, item, "type", 4), "directory", 9);
        out->count++;
    }
    asb_json_doc_free(&d);
    return r;
}

/* "/<op>/<percent-encoded path>" after the safe-path rules. */
static asb_result asb__file_path(const char *op, const char *path, int safe, asb_buf *out,
                                 char *norm, size_t cap, asb_error *err) {
    asb_result r;
    size_t n = 0;
    if (!path) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "path: NULL");
    if (safe) {
        r = asb_path_normalize(path, strlen(path), norm, cap, &n, err);
        if (r != ASB_OK) return r;
    } else {
        snprintf(norm, cap, "%s", path);
        n = strlen(norm);
    }
    asb_buf_append(out, op, strlen(op));
    return asb_percent_encode_segment(norm, n, out);
}

/* GET /<op>/<path> through the router; *resp is the caller's to free. */
static asb_result asb__sb_get(asb_sandbox *sb, const char *op, const char *path, int safe,
                              size_t cap, asb_write_fn sink, void *sink_user,
                              asb_http_response *resp, const asb_call_opts *opts,
                              asb_error *err) {
    char norm[4096];
    asb_buf p;
    asb_http_request req;
    asb_result r;
    memset(resp, 0, sizeof *resp);
    asb_buf_init(&p, &sb->client->alloc);
    r = asb__file_path(op, path, safe, &p, norm, sizeof norm, err);
    if (r == ASB_OK) {
        memset(&req, 0, sizeof req);
        req.max_body_bytes = cap;
        req.on_body = sink;
        req.on_body_user = sink_user;
        req.cancel = opts ? opts->cancel : NULL;
        r = asb__sb_call(sb, &req, p.ptr, opts && opts->timeout_ms > 0 ? opts->timeout_ms : 0,
                         resp, err);
    }
    asb_buf_free(&p);
    return r;
}

typedef struct asb__upload {
    const asb_multipart *mp;
    asb_read_fn read;
    void *user;
    uint64_t size, done;
    int phase;
    size_t off;
} asb__upload;

/* The multipart body as one stream: head, the caller's bytes, tail. */
static long asb__upload_read(void *ud, char *buf, size_t cap) {
    asb__upload *u = (asb__upload *)ud;
    for (;;) {
        if (u->phase == 0 || u->phase == 2) {
            const asb_buf *b = u->phase == 0 ? &u->mp->head : &u->mp->tail;
            size_t n = b->len - u->off < cap ? b->len - u->off : cap;
            if (n == 0) {
                if (u->phase == 2) return 0;
                u->phase = 1;
                u->off = 0;
                continue;
            }
            memcpy(buf, b->ptr + u->off, n);
            u->off += n;
            return (long)n;
        }
        if (u->done == u->size) {
            u->phase = 2;
            u->off = 0;
            continue;
        }
        {
            size_t want = (uint64_t)cap < u->size - u->done ? cap : (size_t)(u->size - u->done);
            long n = u->read(u->user, buf, want);
            if (n <= 0) return -1; /* early end: the length would be a lie */
            u->done += (uint64_t)n;
            return n;
        }
    }
}
/* POST /execute {"command": ...}: the runtime splits the command itself. */
static asb_result asb__legacy_run(asb_sandbox *sb, const char *command, int timeout_ms,
                                  const asb_call_opts *opts, asb_run_result *result,
                                  asb_error *err) {
    asb_http_request req;
    asb_http_response resp;
    asb_http_header ct;
    asb_buf body;
    asb_json_writer w;
    asb_result r;
    asb_buf_init(&body, &sb->client->alloc);
    asb_json_writer_init(&w, &body);
    w.replace_invalid_utf8 = 1;
    asb_json_object_begin(&w);
    asb_json_key(&w, "command");
    asb_json_string(&w, command);
    asb_json_object_end(&w);
    if (asb_json_writer_finish(&w) != ASB_OK) {
        asb_buf_free(&body);
        return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "run: out of memory");
    }
    memset(&req, 0, sizeof req);
    ct.name = "Content-Type";
    ct.value = "application/json";
    req.method = "POST";
    req.headers = &ct;
    req.header_count = 1;
    req.body = body.ptr;
    req.body_len = body.len;
    req.cancel = opts ? opts->cancel : NULL;
    r = asb__sb_call(sb, &req, "/execute", timeout_ms, &resp, err);
    asb_buf_free(&body);
    if (r == ASB_OK &&
        asb__run_answer_decode(resp.body.ptr, resp.body.len, &sb->client->alloc, result) !=
            ASB_OK) {
        r = asb__fail(err, ASB_ERR_HTTP_PROTOCOL,
                      "run: the runtime's answer is not {stdout, stderr, exit_code}");
        if (err) {
            err->http_status = resp.status;
            err->body_len = resp.body.len < sizeof err->body ? resp.body.len : sizeof err->body;
            if (err->body_len) memcpy(err->body, resp.body.ptr, err->body_len);
            asb__error_headers(err, &resp);
            asb__client_mask_error(sb->client, err); /* an echo, like an error's */
        }
    }
    asb_http_response_free(&resp);
    return r;
}

/* The multipart upload, streamed: the caller's bytes between the form's
   head and tail, atomic on the runtime's side. */
static asb_result asb__legacy_write(asb_sandbox *sb, const char *path, asb_read_fn read,
                                    void *user_data, uint64_t size, const asb_call_opts *opts,
                                    asb_error *err) {
    char norm[4096];
    asb_multipart mp;
    asb_buf p;
    asb_http_request req;
    asb_http_response resp;
    asb_http_header ct;
    asb__upload u;
    asb_result r;
    asb_buf_init(&p, &sb->client->alloc);
    r = asb__file_path("", path, 1, &p, norm, sizeof norm, err);
    asb_buf_free(&p);
    if (r != ASB_OK) return r;
    r = asb_multipart_init(&mp, "file", norm, &sb->client->alloc);
    if (r != ASB_OK) return asb__fail(err, r, "write: cannot frame the upload");
    memset(&u, 0, sizeof u);
    u.mp = &mp;
    u.read = read;
    u.user = user_data;
    u.size = size;
    memset(&req, 0, sizeof req);
    ct.name = "Content-Type";
    ct.value = mp.content_type;
    req.method = "POST";
    req.headers = &ct;
    req.header_count = 1;
    req.body_read = asb__upload_read;
    req.body_read_user = &u;
    req.body_len = mp.head.len + size + mp.tail.len;
    req.cancel = opts ? opts->cancel : NULL;
    r = asb__sb_call(sb, &req, "/upload", opts && opts->timeout_ms > 0 ? opts->timeout_ms : 0,
                     &resp, err);
    asb_http_response_free(&resp);
    asb_multipart_free(&mp);
    return r;
}

static asb_result asb__legacy_read(asb_sandbox *sb, const char *path, asb_buf *out,
                                   asb_write_fn sink, void *user, const asb_call_opts *opts,
                                   asb_error *err) {
    asb_http_response resp;
    asb_result r = asb__sb_get(sb, "/download/", path, 1, out ? sb->client->max_read : 0,
                               out ? NULL : sink, user, &resp, opts, err);
    if (r == ASB_OK && out)
        r = asb_buf_append(out, resp.body.ptr ? resp.body.ptr : "", resp.body.len);
    asb_http_response_free(&resp);
    return r;
}

static asb_result asb__legacy_exists(asb_sandbox *sb, const char *path, int *exists,
                                     const asb_call_opts *opts, asb_error *err) {
    asb_http_response resp;
    asb_result r;
    /* not checked client side (as the reference): the runtime confines it */
    r = asb__sb_get(sb, "/exists/", path, 0, 0, NULL, NULL, &resp, opts, err);
    if (r == ASB_OK &&
        asb__exists_answer_decode(resp.body.ptr, resp.body.len, &sb->client->alloc, exists) !=
            ASB_OK)
        r = asb__fail(err, ASB_ERR_HTTP_PROTOCOL, "exists: unexpected answer");
    asb_http_response_free(&resp);
    return r;
}

static asb_result asb__legacy_list(asb_sandbox *sb, const char *path, asb_file_list *out,
                                   const asb_call_opts *opts, asb_error *err) {
    asb_http_response resp;
    asb_result r = asb__sb_get(sb, "/list/", path, 0, 0, NULL, NULL, &resp, opts, err);
    if (r == ASB_OK) {
        r = asb__list_answer_decode(resp.body.ptr, resp.body.len, out);
        if (r == ASB_ERR_OUT_OF_MEMORY)
            asb__fail(err, r, "list: out of memory");
        else if (r != ASB_OK)
            asb__fail(err, r, "list: the answer is not a JSON list");
    }
    asb_http_response_free(&resp);
    return r;
}

static const asb__runtime asb__runtime_legacy = {
    "legacy",          asb__legacy_probe, asb__legacy_run,   asb__legacy_write,
    asb__legacy_read,  asb__legacy_list,  asb__legacy_exists, NULL, NULL, NULL, NULL, 0};

/* >>runtime: sandboxd =======================================================
   sandboxd (KEP-539.2, agent-sandbox packages/sandboxd): files over REST
   on sandboxd_rest_port (GET/HEAD/PUT/DELETE /v1/files/<path>, GET
   /v1/health, GET /v1/metadata), processes over gRPC on
   sandboxd_grpc_port (process.v1.ProcessService), on one HTTP/2
   connection per handle (made on first use, again once it broke). run
   wraps the command in /bin/sh -c, as the Python SDK 1.0.8 does, so a
   command line means the same on both runtimes. */

#define ASB__SD_METHOD(m) "/process.v1.ProcessService/" m

/* sandboxd's JSON error body ({"code": ..., "message": ...}) and gRPC
   status names, as asb_result codes; err->reason keeps the name. */
static asb_result asb__sd_code(const char *code, asb_result fallback) {
    if (strcmp(code, "NOT_FOUND") == 0) return ASB_ERR_NOT_FOUND;
    if (strcmp(code, "PERMISSION_DENIED") == 0) return ASB_ERR_PERMISSION_DENIED;
    if (strcmp(code, "CONFLICT") == 0 || strcmp(code, "ALREADY_EXISTS") == 0)
        return ASB_ERR_CONFLICT;
    if (strcmp(code, "INVALID_ARGUMENT") == 0) return ASB_ERR_INVALID_ARGUMENT;
    return fallback;
}

/* A failed REST call: the code and message of sandboxd's error body go
   into *err (the status and the body's first bytes stay there too). */
static asb_result asb__sd_rest_error(asb_result r, const char *what, const char *path,
                                     asb_error *e) {
    asb_json_doc d;
    char code[64] = "", msg[300] = "", q[160];
    if (r == ASB_OK || e->http_status < 400) return r;
    if (e->body_len && asb_json_doc_parse(&d, e->body, e->body_len, NULL, NULL) == ASB_OK) {
        asb_json_get_string(&d, asb_json_find(&d, 0, "code"), code, sizeof code, NULL);
        asb_json_get_string(&d, asb_json_find(&d, 0, "message"), msg, sizeof msg, NULL);
        asb_json_doc_free(&d);
    }
    asb__scrub_controls(code);
    asb__scrub_controls(msg);
    if (!code[0]) { /* no body (HEAD) or not sandboxd's: by the status */
        snprintf(code, sizeof code, "%s",
                 e->http_status == 403   ? "PERMISSION_DENIED"
                 : e->http_status == 404 ? "NOT_FOUND"
                 : e->http_status == 409 ? "CONFLICT"
                 : e->http_status == 400 ? "INVALID_ARGUMENT"
                                         : "");
    }
    r = asb__sd_code(code, r);
    asb__quote(q, sizeof q, path, strlen(path), 120);
    {
        int status = e->http_status;
        asb__fail(e, r, "%s \"%s\": sandboxd answered %d %s%s%s", what, q, status, code,
                  msg[0] ? ": " : "", msg);
        e->http_status = status;
    }
    snprintf(e->reason, sizeof e->reason, "%s", code);
    return r;
}

/* A failed gRPC call: its status name as an asb_result. */
static asb_result asb__sd_grpc_error(asb_result r, asb_error *e) {
    if (r == ASB_ERR_GRPC_STATUS) {
        asb_result m = asb__sd_code(e->reason, r);
        if (m != r) e->code = m;
        return m;
    }
    return r;
}

/* "/v1/files/<path as one percent-encoded segment>" ('/' as %2F, as
   sandboxd's spec asks; "." and ".." as %2E, %2E%2E). */
static asb_result asb__sd_files_path(const char *path, asb_buf *out) {
    asb_result r = asb_buf_append(out, "/v1/files/", 10);
    return r == ASB_OK ? asb_percent_encode_segment(path, strlen(path), out) : r;
}

/* One REST call on sandboxd's port: sb_call on the REST port, the error
   mapped. *resp is the caller's to free. */
static asb_result asb__sd_rest(asb_sandbox *sb, asb_http_request *req, const char *url_path,
                               const char *what, const char *path, int timeout_ms,
                               asb_http_response *resp, asb_error *err) {
    asb_error e;
    asb_result r;
    memset(&e, 0, sizeof e);
    r = asb__sb_call_port(sb, sb->client->sd_rest_port, req, url_path, timeout_ms, resp, &e);
    r = asb__sd_rest_error(r, what, path, &e);
    if (r != ASB_OK && err) *err = e;
    return r;
}

/* The handle's gRPC connection: made on first use, and again when the
   last one broke (kubectl died, sandboxd restarted). A broken one is kept
   until the handle goes, for streams a process may still hold. */
static asb_result asb__sd_h2(asb_sandbox *sb, asb_h2_conn **out, asb_error *err) {
    asb_client *c = sb->client;
    asb_result r = ASB_OK;
    *out = NULL;
    if (!sb->active || sb->closed)
        return asb__fail(err, ASB_ERR_CLOSED, "sandbox: the handle was terminated or closed");
    pthread_mutex_lock(&sb->h2_lock);
    if (sb->h2 && !asb_h2_conn_usable(sb->h2)) {
        asb_h2_conn **old = (asb_h2_conn **)c->alloc.realloc_fn(
            sb->h2_old, (sb->h2_old_count + 1) * sizeof *old, c->alloc.user_data);
        if (!old) {
            r = asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "sandboxd: out of memory");
        } else {
            sb->h2_old = old;
            sb->h2_old[sb->h2_old_count++] = sb->h2;
            sb->h2 = NULL;
        }
    }
    if (r == ASB_OK && !sb->h2) {
        asb__endpoint ep;
        r = sb->conn->endpoint(c, sb, c->sd_grpc_port, &ep, err);
        if (r == ASB_OK) {
            asb_h2_desc d = c->h2_desc;
            d.url = ep.base;
            if (sb->conn->dial) { /* the connector makes the connection */
                d.dial = asb__client_dial;
                d.dial_user_data = c;
            }
            r = asb_h2_connect(&d, &sb->h2, err);
            if (r == ASB_ERR_CONNECT && sb->conn->reconnect) {
                int again = 0;
                r = sb->conn->reconnect(c, sb, c->sd_grpc_port, 1, &ep, &again, err);
                if (r == ASB_OK && again) {
                    d.url = ep.base;
                    r = asb_h2_connect(&d, &sb->h2, err);
                } else if (r == ASB_OK) {
                    r = ASB_ERR_CONNECT;
                }
            }
        }
    }
    if (r == ASB_OK) *out = sb->h2;
    pthread_mutex_unlock(&sb->h2_lock);
    return r;
}

/* Reads what the call's stream has (waiting at most until `until`, 0:
   no limit, in slices that watch `cancel`) and feeds complete messages
   to sink. *ended: the stream is over and the result is the call's
   status. ASB_ERR_TIMEOUT: `until` passed with nothing to read. */
static asb_result asb__sd_read(asb_grpc_call *call, asb__grpc_deframer *d, asb__grpc_sink sink,
                               void *ctx, int64_t until, const asb_cancel *cancel, int *ended,
                               asb_error *err) {
    char buf[16384];
    asb_h2_stream *s = call->s;
    *ended = 0;
    for (;;) {
        size_t n = 0;
        int64_t slice = asb__now_ms() + 100, saved;
        asb_result r;
        if (cancel && asb_cancel_is_triggered(cancel))
            return asb__fail(err, ASB_ERR_CANCELLED, "sandboxd %s: cancelled", call->method);
        if (until && asb__now_ms() >= until)
            return asb__fail(err, ASB_ERR_TIMEOUT, "sandboxd %s: still running", call->method);
        if (until && until < slice) slice = until;
        pthread_mutex_lock(&s->conn->mu);
        saved = s->deadline; /* the call's own, if any, comes first */
        s->deadline = saved && saved < slice ? saved : slice;
        pthread_mutex_unlock(&s->conn->mu);
        r = asb_h2_stream_read(s, buf, sizeof buf, &n, err);
        pthread_mutex_lock(&s->conn->mu);
        s->deadline = saved;
        pthread_mutex_unlock(&s->conn->mu);
        if (r == ASB_ERR_TIMEOUT && !(saved && asb__now_ms() >= saved)) continue; /* a slice */
        if (r != ASB_OK) {
            if (s->reset_by_peer && s->failed)
                r = asb__grpc_status_result(call, asb__grpc_from_rst(s->rst_code),
                                            "stream reset by the server", 26, err);
            else if (r == ASB_ERR_TIMEOUT && err)
                snprintf(err->reason, sizeof err->reason, "DEADLINE_EXCEEDED");
            return asb__sd_grpc_error(r, err);
        }
        if (n == 0) {
            *ended = 1;
            return asb__sd_grpc_error(asb__grpc_finish(call, d, err), err);
        }
        r = asb__grpc_feed(d, buf, n, sink, ctx);
        if (r == ASB_ERR_TOO_LARGE)
            return asb__fail(err, r, "sandboxd %s: a message above %lu bytes", call->method,
                             (unsigned long)d->max);
        if (r == ASB_ERR_CANCELLED) /* the sink refused a message: its err says why */
            return ASB_ERR_PROTOBUF_INVALID;
        if (r != ASB_OK)
            return asb__fail(err, r, "sandboxd %s: a malformed or compressed message",
                             call->method);
        return ASB_OK;
    }
}

typedef struct asb__sd_unary_ctx {
    asb_buf *out;
    int count;
} asb__sd_unary_ctx;

static int asb__sd_unary_sink(void *ctx, const char *msg, size_t len) {
    asb__sd_unary_ctx *u = (asb__sd_unary_ctx *)ctx;
    u->count++;
    return u->count == 1 ? asb_buf_append(u->out, msg, len) != ASB_OK : 1;
}

/* A unary call on the handle's gRPC connection, with a deadline and a
   cancel token; the one response message appended to *resp. */
static asb_result asb__sd_unary(asb_sandbox *sb, const char *method, const asb_buf *req,
                                int timeout_ms, const asb_cancel *cancel, size_t max,
                                asb_buf *resp, asb_error *err) {
    asb_grpc_call_desc cd;
    asb_grpc_call *call = NULL;
    asb_h2_conn *h2;
    asb__grpc_deframer d;
    asb__sd_unary_ctx u;
    asb_error e;
    int ended = 0;
    asb_result r;
    memset(&e, 0, sizeof e);
    r = asb__sd_h2(sb, &h2, &e);
    memset(&cd, 0, sizeof cd);
    cd.method = method;
    cd.timeout_ms = timeout_ms;
    cd.max_message_bytes = max;
    if (r == ASB_OK) r = asb_grpc_call_start(h2, &cd, req->ptr, req->len, &call, &e);
    if (r == ASB_ERR_CLOSED) {
        /* the connection went away between the check and the open (a GOAWAY,
           a dead kubectl): once more on a fresh one; nothing was sent */
        r = asb__sd_h2(sb, &h2, &e);
        if (r == ASB_OK) r = asb_grpc_call_start(h2, &cd, req->ptr, req->len, &call, &e);
    }
    memset(&d, 0, sizeof d);
    d.max = cd.max_message_bytes ? cd.max_message_bytes : (size_t)4 << 20;
    asb_buf_init(&d.msg, &sb->client->alloc);
    u.out = resp;
    u.count = 0;
    while (r == ASB_OK && !ended)
        r = asb__sd_read(call, &d, asb__sd_unary_sink, &u, 0, cancel, &ended, &e);
    if (r == ASB_OK && u.count != 1)
        r = asb__fail(&e, ASB_ERR_HTTP_PROTOCOL, "sandboxd %s: %d response messages, not 1",
                      method, u.count);
    asb_buf_free(&d.msg);
    asb_grpc_call_free(call);
    if (r != ASB_OK && err) *err = e;
    return r;
}

/* ProcessConfig from a caller's env list: names checked, arrays built in
   `names` / `values` (the caller frees both). */
static asb_result asb__sd_env(asb_client *c, const asb_env_var *env, size_t n,
                              const char ***names, const char ***values, asb_error *err) {
    size_t i;
    *names = *values = NULL;
    if (!n) return ASB_OK;
    if (!env) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "env is NULL");
    for (i = 0; i < n; i++)
        if (asb_env_name_validate(env[i].name, env[i].name ? strlen(env[i].name) : 0, err) !=
            ASB_OK)
            return ASB_ERR_INVALID_ARGUMENT;
    *names = (const char **)c->alloc.alloc_fn(n * sizeof(char *), c->alloc.user_data);
    *values = (const char **)c->alloc.alloc_fn(n * sizeof(char *), c->alloc.user_data);
    if (!*names || !*values) {
        if (*names) c->alloc.free_fn((void *)*names, c->alloc.user_data);
        if (*values) c->alloc.free_fn((void *)*values, c->alloc.user_data);
        *names = *values = NULL;
        return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "out of memory");
    }
    for (i = 0; i < n; i++) {
        (*names)[i] = env[i].name;
        (*values)[i] = env[i].value ? env[i].value : "";
    }
    return ASB_OK;
}

static void asb__sd_env_free(asb_client *c, const char **names, const char **values) {
    if (names) c->alloc.free_fn((void *)names, c->alloc.user_data);
    if (values) c->alloc.free_fn((void *)values, c->alloc.user_data);
}

/* GET /v1/health until it says 200 (probe_runtime), within deadline. */
static asb_result asb__sd_probe(asb_sandbox *sb, int64_t deadline, const asb_cancel *cancel,
                                int route_only, asb_error *err) {
    int64_t pause = 50;
    (void)route_only; /* no router in front of sandboxd */
    for (;;) {
        asb_http_request req;
        asb_http_response resp;
        asb_retry_policy once;
        asb_result r;
        memset(&req, 0, sizeof req);
        memset(&once, 0, sizeof once);
        once.max_attempts = 1;
        req.retry = &once;
        req.cancel = cancel;
        r = asb__sb_call_port(sb, sb->client->sd_rest_port, &req, "/v1/health", 0, &resp, err);
        asb_http_response_free(&resp);
        if (r == ASB_OK) return ASB_OK;
        if (r != ASB_ERR_HTTP_STATUS && r != ASB_ERR_CONNECT && r != ASB_ERR_RECV &&
            r != ASB_ERR_SEND)
            return r;
        if (asb__now_ms() + pause >= deadline)
            return asb__fail(err, ASB_ERR_TIMEOUT,
                             "sandbox %s is Ready but sandboxd's /v1/health did not say ok in "
                             "time (%s)",
                             sb->name, asb_result_str(r));
        if (asb__sleep_or_cancel(pause, cancel))
            return asb__fail(err, ASB_ERR_CANCELLED, "sandbox %s: cancelled while probing sandboxd",
                             sb->name);
        if (pause < 1000) pause *= 2;
    }
}

/* Execute {/bin/sh -c command} with the options' env and cwd. */
static asb_result asb__sd_run_ex(asb_sandbox *sb, const char *command, int timeout_ms,
                                 const asb_call_opts *opts, asb_run_result *result,
                                 asb_error *err) {
    asb_client *c = sb->client;
    const char *argv[3];
    const char **names = NULL, **values = NULL;
    asb__pv1_config cfg;
    asb__pv1_exec_result x;
    asb_buf req, resp;
    asb_result r;
    argv[0] = "/bin/sh";
    argv[1] = "-c";
    argv[2] = command;
    memset(&cfg, 0, sizeof cfg);
    cfg.argv = argv;
    cfg.argc = 3;
    r = asb__sd_env(c, opts ? opts->env : NULL, opts ? opts->env_count : 0, &names, &values, err);
    if (r != ASB_OK) return r;
    cfg.env_names = names;
    cfg.env_values = values;
    cfg.env_count = names ? opts->env_count : 0;
    cfg.cwd = opts && opts->cwd && *opts->cwd ? opts->cwd : NULL;
    asb_buf_init(&req, &c->alloc);
    asb_buf_init(&resp, &c->alloc);
    if (asb__pv1_execute_request(&req, &cfg) != ASB_OK)
        r = asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "run: out of memory");
    asb__sd_env_free(c, names, values);
    /* both outputs and the framing: one message */
    if (r == ASB_OK)
        r = asb__sd_unary(sb, ASB__SD_METHOD("Execute"), &req, timeout_ms,
                          opts ? opts->cancel : NULL, 2 * c->max_output + 64, &resp, err);
    if (r == ASB_OK) r = asb__pv1_execute_response(resp.ptr, resp.len, &x, err);
    if (r == ASB_OK && x.out.len + x.errout.len > c->max_output)
        r = asb__fail(err, ASB_ERR_TOO_LARGE, "run: %zu bytes of output, above max_output_bytes %zu",
                      x.out.len + x.errout.len, c->max_output);
    if (r == ASB_OK) r = asb_buf_append(&result->out, x.out.ptr ? x.out.ptr : "", x.out.len);
    if (r == ASB_OK) r = asb_buf_append(&result->err, x.errout.ptr ? x.errout.ptr : "", x.errout.len);
    if (r == ASB_OK) result->exit_code = x.exit_code;
    if (r == ASB_ERR_TIMEOUT && err)
        asb__fail(err, r, "run: no answer within the %d ms deadline; the command may still be "
                          "running in the sandbox", timeout_ms);
    asb_buf_free(&req);
    asb_buf_free(&resp);
    return r;
}

/* A body of exactly `size` bytes from the caller's reader. */
typedef struct asb__sd_body {
    asb_read_fn read;
    void *user;
    uint64_t size, done;
} asb__sd_body;

static long asb__sd_body_read(void *ud, char *buf, size_t cap) {
    asb__sd_body *b = (asb__sd_body *)ud;
    size_t want = (uint64_t)cap < b->size - b->done ? cap : (size_t)(b->size - b->done);
    long n;
    if (want == 0) return 0;
    n = b->read(b->user, buf, want);
    if (n <= 0) return -1; /* early end: the length would be a lie */
    b->done += (uint64_t)n;
    return n;
}

/* PUT the raw bytes (streamed; sandboxd writes a temporary file and
   renames it, so a reader never sees half of it). */
static asb_result asb__sd_write(asb_sandbox *sb, const char *path, asb_read_fn read,
                                void *user_data, uint64_t size, const asb_call_opts *opts,
                                asb_error *err) {
    char norm[4096];
    asb_buf url;
    asb_http_request req;
    asb_http_response resp;
    asb_http_header ct;
    asb__sd_body body;
    asb_result r;
    size_t n = 0;
    if (opts && opts->file_mode > 0777)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "write: file_mode %o is above 0777",
                         opts->file_mode);
    r = asb_path_normalize(path ? path : "", path ? strlen(path) : 0, norm, sizeof norm, &n, err);
    if (r != ASB_OK) return r;
    asb_buf_init(&url, &sb->client->alloc);
    r = asb__sd_files_path(norm, &url);
    if (r == ASB_OK && opts && opts->file_mode) {
        char q[24];
        snprintf(q, sizeof q, "?mode=0%03o", opts->file_mode & 0777u);
        r = asb_buf_append(&url, q, strlen(q));
    }
    if (r != ASB_OK) {
        asb_buf_free(&url);
        return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "write: out of memory");
    }
    body.read = read;
    body.user = user_data;
    body.size = size;
    body.done = 0;
    memset(&req, 0, sizeof req);
    ct.name = "Content-Type";
    ct.value = "application/octet-stream";
    req.method = "PUT";
    req.headers = &ct;
    req.header_count = 1;
    req.body_read = asb__sd_body_read;
    req.body_read_user = &body;
    req.body_len = size;
    req.cancel = opts ? opts->cancel : NULL;
    r = asb__sd_rest(sb, &req, url.ptr, "write", norm, opts && opts->timeout_ms > 0 ? opts->timeout_ms : 0,
                     &resp, err);
    asb_http_response_free(&resp);
    asb_buf_free(&url);
    return r;
}

static asb_result asb__sd_read_file(asb_sandbox *sb, const char *path, asb_buf *out,
                                    asb_write_fn sink, void *user, const asb_call_opts *opts,
                                    asb_error *err) {
    char norm[4096];
    asb_buf url;
    asb_http_request req;
    asb_http_response resp;
    asb_result r;
    size_t n = 0;
    r = asb_path_normalize(path ? path : "", path ? strlen(path) : 0, norm, sizeof norm, &n, err);
    if (r != ASB_OK) return r;
    asb_buf_init(&url, &sb->client->alloc);
    if (asb__sd_files_path(norm, &url) != ASB_OK) {
        asb_buf_free(&url);
        return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "read: out of memory");
    }
    memset(&req, 0, sizeof req);
    req.max_body_bytes = out ? sb->client->max_read : 0;
    req.on_body = out ? NULL : sink;
    req.on_body_user = user;
    req.cancel = opts ? opts->cancel : NULL;
    r = asb__sd_rest(sb, &req, url.ptr, "read", norm, opts && opts->timeout_ms > 0 ? opts->timeout_ms : 0,
                     &resp, err);
    if (r == ASB_OK) {
        /* a directory answers with its listing: not a file's bytes */
        const char *ctype = asb_http_response_header(&resp, "Content-Type");
        if (ctype && strncmp(ctype, "application/json", 16) == 0)
            r = asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "read: \"%.200s\" is a directory", norm);
    }
    if (r == ASB_OK && out)
        r = asb_buf_append(out, resp.body.ptr ? resp.body.ptr : "", resp.body.len);
    asb_http_response_free(&resp);
    asb_buf_free(&url);
    return r;
}

/* DirectoryListing {"path", "entries": [{name, size, type, modified_at,
   mode}]}; entries of other types (a symlink) are skipped, as 1.0.8
   does. out->alloc_ is set. */
static asb_result asb__sd_list_decode(const char *body, size_t len, asb_file_list *out) {
    asb_json_doc d;
    asb_json_iter it;
    int item, entries;
    asb_result r = ASB_OK;
    if (asb_json_doc_parse(&d, body ? body : "", len, &out->alloc_, NULL) != ASB_OK)
        return ASB_ERR_HTTP_PROTOCOL;
    entries = asb_json_find(&d, 0, "entries");
    if (d.toks[0].type != ASB_JSON_OBJECT || entries < 0 ||
        (d.toks[entries].type != ASB_JSON_ARRAY && d.toks[entries].type != ASB_JSON_PRIMITIVE)) {
        asb_json_doc_free(&d);
        return ASB_ERR_HTTP_PROTOCOL;
    }
    out->entries = (asb_file_entry *)out->alloc_.alloc_fn(
        ((size_t)(d.toks[entries].type == ASB_JSON_ARRAY ? d.toks[entries].size : 0) + 1) *
            sizeof(asb_file_entry),
        out->alloc_.user_data);
    if (!out->entries) r = ASB_ERR_OUT_OF_MEMORY;
    it = asb_json_iter_begin(&d, entries);
    while (r == ASB_OK && asb_json_iter_next(&d, &it, NULL, &item)) {
        asb_file_entry *e = &out->entries[out->count];
        asb_buf name;
        int64_t size = 0, t = 0;
        char ts[64] = "";
        int type = asb_json_member(&d, item, "type", 4);
        int dir = asb_json_string_eq(&d, type, "directory", 9);
        if (!dir && !asb_json_string_eq(&d, type, "file", 4)) continue;
        memset(e, 0, sizeof *e);
        asb_buf_init(&name, &out->alloc_);
        if (asb_json_append_string(&d, asb_json_member(&d, item, "name", 4), &name) != ASB_OK) {
            asb_buf_free(&name);
            continue; /* an entry without a name is skipped */
        }
        e->name = name.ptr;
        asb_json_get_int64(&d, asb_json_member(&d, item, "size", 4), &size);
        e->size = size > 0 ? (uint64_t)size : 0;
        if (asb_json_get_string(&d, asb_json_member(&d, item, "modified_at", 11), ts, sizeof ts,
                                NULL) == ASB_OK &&
            asb_time_parse_rfc3339(ts, strlen(ts), &t, NULL) == ASB_OK)
            e->mod_time = (double)t;
        e->is_dir = dir;
        out->count++;
    }
    asb_json_doc_free(&d);
    return r;
}

static asb_result asb__sd_list(asb_sandbox *sb, const char *path, asb_file_list *out,
                               const asb_call_opts *opts, asb_error *err) {
    asb_buf url;
    asb_http_request req;
    asb_http_response resp;
    asb_result r;
    if (!path) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "path: NULL");
    asb_buf_init(&url, &sb->client->alloc);
    if (asb__sd_files_path(path, &url) != ASB_OK) {
        asb_buf_free(&url);
        return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "list: out of memory");
    }
    memset(&req, 0, sizeof req);
    req.cancel = opts ? opts->cancel : NULL;
    r = asb__sd_rest(sb, &req, url.ptr, "list", path, opts && opts->timeout_ms > 0 ? opts->timeout_ms : 0,
                     &resp, err);
    if (r == ASB_OK) {
        r = asb__sd_list_decode(resp.body.ptr, resp.body.len, out);
        if (r == ASB_ERR_OUT_OF_MEMORY)
            asb__fail(err, r, "list: out of memory");
        else if (r != ASB_OK)
            asb__fail(err, r, "list: \"%.200s\" is not a directory (sandboxd sent no listing)",
                      path);
    }
    asb_http_response_free(&resp);
    asb_buf_free(&url);
    return r;
}

static asb_result asb__sd_stat(asb_sandbox *sb, const char *path, asb_file_stat *st,
                               const asb_call_opts *opts, asb_error *err) {
    asb_buf url;
    asb_http_request req;
    asb_http_response resp;
    asb_result r;
    asb_error e;
    memset(st, 0, sizeof *st);
    if (!path) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "path: NULL");
    asb_buf_init(&url, &sb->client->alloc);
    if (asb__sd_files_path(path, &url) != ASB_OK) {
        asb_buf_free(&url);
        return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "stat: out of memory");
    }
    memset(&req, 0, sizeof req);
    memset(&e, 0, sizeof e);
    req.method = "HEAD";
    req.cancel = opts ? opts->cancel : NULL;
    r = asb__sd_rest(sb, &req, url.ptr, "stat", path, opts && opts->timeout_ms > 0 ? opts->timeout_ms : 0,
                     &resp, &e);
    if (r == ASB_ERR_NOT_FOUND && e.http_status == 404) {
        r = ASB_OK; /* nothing there: an answer, not an error */
    } else if (r == ASB_OK) {
        const char *ctype = asb_http_response_header(&resp, "Content-Type");
        const char *lm = asb_http_response_header(&resp, "Last-Modified");
        const char *cl = asb_http_response_header(&resp, "Content-Length");
        st->exists = 1;
        st->is_dir = ctype && strncmp(ctype, "application/json", 16) == 0;
        if (!st->is_dir && cl) {
            char *end;
            unsigned long long v = strtoull(cl, &end, 10);
            if (end != cl && *end == '\0') st->size = (uint64_t)v;
        }
        if (lm && strchr(lm, ',')) {
            /* an IMF-fixdate, read as a wait from the epoch: its time */
            int64_t ms = asb__retry_after_parse(lm, 0);
            if (ms > 0) st->mod_time = (double)(ms / 1000);
        }
    } else if (err) {
        *err = e;
    }
    asb_http_response_free(&resp);
    asb_buf_free(&url);
    return r;
}

static asb_result asb__sd_delete(asb_sandbox *sb, const char *path, int recursive,
                                 const asb_call_opts *opts, asb_error *err) {
    asb_buf url;
    asb_http_request req;
    asb_http_response resp;
    asb_result r;
    size_t i, n = path ? strlen(path) : 0;
    for (i = 0; i < n && (path[i] == '/' || path[i] == '.'); i++) {}
    if (!path || i == n) /* "", "/", ".", "./": the root itself */
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "delete: \"%.100s\" is the sandbox root; name a path inside it",
                         path ? path : "(null)");
    asb_buf_init(&url, &sb->client->alloc);
    if (asb__sd_files_path(path, &url) != ASB_OK ||
        (recursive && asb_buf_append(&url, "?recursive=true", 15) != ASB_OK)) {
        asb_buf_free(&url);
        return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "delete: out of memory");
    }
    memset(&req, 0, sizeof req);
    req.method = "DELETE";
    req.cancel = opts ? opts->cancel : NULL;
    r = asb__sd_rest(sb, &req, url.ptr, "delete", path, opts && opts->timeout_ms > 0 ? opts->timeout_ms : 0,
                     &resp, err);
    if (r == ASB_ERR_CONFLICT && err && !recursive) {
        size_t l = strlen(err->message);
        snprintf(err->message + l, sizeof err->message - l,
                 " (a directory that is not empty: delete it with recursive 1)");
    }
    asb_http_response_free(&resp);
    asb_buf_free(&url);
    return r;
}

static asb_result asb__sd_exists(asb_sandbox *sb, const char *path, int *exists,
                                 const asb_call_opts *opts, asb_error *err) {
    asb_file_stat st;
    asb_result r = asb__sd_stat(sb, path, &st, opts, err);
    *exists = r == ASB_OK && st.exists;
    return r;
}

static asb_result asb__sd_metadata(asb_sandbox *sb, asb_buf *out, const asb_call_opts *opts,
                                   asb_error *err) {
    asb_http_request req;
    asb_http_response resp;
    asb_result r;
    memset(&req, 0, sizeof req);
    req.cancel = opts ? opts->cancel : NULL;
    r = asb__sd_rest(sb, &req, "/v1/metadata", "metadata", "/v1/metadata",
                     opts && opts->timeout_ms > 0 ? opts->timeout_ms : 0, &resp, err);
    if (r == ASB_OK) r = asb_buf_append(out, resp.body.ptr ? resp.body.ptr : "", resp.body.len);
    asb_http_response_free(&resp);
    return r;
}

/* -- streaming processes ----------------------------------------------------------- */

struct asb_process {
    asb_sandbox *sb;
    asb_grpc_call *call;       /* the Start stream */
    asb__grpc_deframer d;
    asb_process_output_fn on_output;
    void *user_data;
    int32_t pid;               /* 0 until the init event */
    int exited, exit_code;
    int ended;                 /* the stream is over */
    asb_result final;          /* a failure that ended the stream */
    asb_error final_err;
    int64_t deadline;          /* opts.timeout_ms from the start; 0: none */
    const asb_cancel *cancel;
    pthread_mutex_t stdin_lock; /* writes go out in order, close once */
    int stdin_closed;
    asb_error event_err;       /* why the last event was refused */
};

/* One StartResponse off the stream. */
static int asb__proc_event(void *ctx, const char *msg, size_t len) {
    asb_process *p = (asb_process *)ctx;
    asb__pv1_event ev;
    if (asb__pv1_start_response(msg, len, &ev, &p->event_err) != ASB_OK) return 1;
    switch (ev.kind) {
    case ASB__PV1_INIT: p->pid = ev.value; break;
    case ASB__PV1_STDOUT:
    case ASB__PV1_STDERR:
        if (p->on_output && ev.data.len)
            p->on_output(p->user_data,
                         ev.kind == ASB__PV1_STDOUT ? ASB_PROCESS_STDOUT : ASB_PROCESS_STDERR,
                         ev.data.ptr, ev.data.len);
        break;
    case ASB__PV1_EXIT:
        p->exited = 1;
        p->exit_code = ev.value;
        break;
    default: break; /* an event this version does not know */
    }
    return 0;
}

/* Reads events until `done` says so, until (0: none), the process's own
   deadline or cancel. */
static asb_result asb__proc_pump(asb_process *p, int for_exit, int64_t until, asb_error *err) {
    while (!(for_exit ? p->exited : p->pid != 0 || p->exited)) {
        asb_result r;
        int64_t lim = until;
        if (p->ended) {
            if (p->final == ASB_OK)
                p->final = asb__fail(&p->final_err, ASB_ERR_HTTP_PROTOCOL,
                                     "sandboxd Start: the stream ended without %s",
                                     for_exit ? "an exit event" : "an init event");
            if (err) *err = p->final_err;
            return p->final;
        }
        if (p->deadline && (!lim || p->deadline < lim)) lim = p->deadline;
        r = asb__sd_read(p->call, &p->d, asb__proc_event, p, lim, p->cancel, &p->ended, err);
        if (r == ASB_ERR_PROTOBUF_INVALID && err && !p->ended) *err = p->event_err;
        if (r == ASB_ERR_TIMEOUT && lim == until && until && asb__now_ms() >= until &&
            !(p->deadline && asb__now_ms() >= p->deadline))
            return r; /* the caller's wait, not the process's deadline: call again */
        if (r == ASB_ERR_TIMEOUT && err)
            asb__fail(err, r, "process %d: its %s deadline passed; it is ended", (int)p->pid,
                      "timeout_ms");
        if (r != ASB_OK) {
            /* the stream is over for good (a deadline, cancel or broken
               stream ends it: sandboxd kills the process with it) */
            asb_grpc_call_cancel(p->call);
            p->ended = 1;
            p->final = r;
            if (err) p->final_err = *err;
            else asb__fail(&p->final_err, r, "process %d: %s", (int)p->pid, asb_result_str(r));
            return r;
        }
    }
    return ASB_OK;
}

static void asb__proc_free(asb_process *p) {
    asb_allocator a = p->sb->client->alloc;
    asb_grpc_call_free(p->call);
    asb_buf_free(&p->d.msg);
    pthread_mutex_destroy(&p->stdin_lock);
    a.free_fn(p, a.user_data);
}

static asb_result asb__sd_process_start(asb_sandbox *sb, const asb_process_opts *o,
                                        asb_process **out, asb_error *err) {
    asb_client *c = sb->client;
    const char *sh[3];
    const char **names = NULL, **values = NULL;
    asb__pv1_config cfg;
    asb_grpc_call_desc cd;
    asb_h2_conn *h2;
    asb_process *p;
    asb_buf req;
    asb_result r;
    size_t i;
    if ((o->argv && o->argc ? 1 : 0) + (o->shell ? 1 : 0) != 1)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "process: give argv (argc > 0) or shell, exactly one");
    for (i = 0; o->argv && i < o->argc; i++)
        if (!o->argv[i])
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "process: argv[%zu] is NULL", i);
    if (o->pty && (o->pty_rows > 65535 || o->pty_cols > 65535))
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "process: a PTY of at most 65535 x 65535");
    memset(&cfg, 0, sizeof cfg);
    if (o->shell) {
        sh[0] = "/bin/sh";
        sh[1] = "-c";
        sh[2] = o->shell;
        cfg.argv = sh;
        cfg.argc = 3;
    } else {
        cfg.argv = o->argv;
        cfg.argc = o->argc;
    }
    r = asb__sd_env(c, o->env, o->env_count, &names, &values, err);
    if (r != ASB_OK) return r;
    cfg.env_names = names;
    cfg.env_values = values;
    cfg.env_count = names ? o->env_count : 0;
    cfg.cwd = o->cwd && *o->cwd ? o->cwd : NULL;
    asb_buf_init(&req, &c->alloc);
    r = asb__pv1_start_request(&req, &cfg, o->pty != 0, o->pty ? (o->pty_cols ? o->pty_cols : 80) : 0,
                               o->pty ? (o->pty_rows ? o->pty_rows : 24) : 0);
    asb__sd_env_free(c, names, values);
    if (r != ASB_OK) {
        asb_buf_free(&req);
        return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "process: out of memory");
    }
    p = (asb_process *)c->alloc.alloc_fn(sizeof *p, c->alloc.user_data);
    if (!p) {
        asb_buf_free(&req);
        return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "process: out of memory");
    }
    memset(p, 0, sizeof *p);
    p->sb = sb;
    p->on_output = o->on_output;
    p->user_data = o->user_data;
    p->cancel = o->cancel;
    p->deadline = o->timeout_ms > 0 ? asb__now_ms() + o->timeout_ms : 0;
    pthread_mutex_init(&p->stdin_lock, NULL);
    p->d.max = (size_t)1 << 20; /* chunks are sandboxd's --stream-chunk-size */
    asb_buf_init(&p->d.msg, &c->alloc);
    memset(&cd, 0, sizeof cd);
    cd.method = ASB__SD_METHOD("Start");
    cd.max_message_bytes = p->d.max;
    r = asb__sd_h2(sb, &h2, err);
    if (r == ASB_OK) r = asb_grpc_call_start(h2, &cd, req.ptr, req.len, &p->call, err);
    if (r == ASB_ERR_CLOSED) {
        r = asb__sd_h2(sb, &h2, err);
        if (r == ASB_OK) r = asb_grpc_call_start(h2, &cd, req.ptr, req.len, &p->call, err);
    }
    asb_buf_free(&req);
    if (r == ASB_OK) r = asb__proc_pump(p, 0, 0, err); /* until the init event */
    if (r != ASB_OK) {
        asb__proc_free(p);
        return r;
    }
    asb__log(&c->log, ASB_LOG_DEBUG, "sandbox.process", "process %d started%s (sandbox %s/%s)",
             (int)p->pid, o->pty ? " on a PTY" : "", sb->ns, sb->name);
    *out = p;
    return ASB_OK;
}

static const asb__runtime asb__runtime_sandboxd = {
    "sandboxd",        asb__sd_probe,  asb__sd_run_ex, asb__sd_write,       asb__sd_read_file,
    asb__sd_list,      asb__sd_exists, asb__sd_stat,   asb__sd_delete,      asb__sd_metadata,
    asb__sd_process_start, 1};

/* A small unary call of the process API (WriteStdin, SendSignal,
   ResizeTTY) on the process's connection. */
static asb_result asb__proc_unary(asb_process *p, const char *method, asb_buf *req,
                                  asb_error *err) {
    asb_buf resp;
    asb_result r;
    asb_buf_init(&resp, &p->sb->client->alloc);
    r = asb__sd_unary(p->sb, method, req, 30000, NULL, 4096, &resp, err);
    asb_buf_free(&resp);
    return r;
}

/* >>sandbox =================================================================
   The client (registry of handles), create with one watch, and the
   handle's calls to the runtime through the router. */

/* -- tracing a handle's calls (see >>trace) ------------------------------------ */

#if ASB_TRACING
/* A call's span, child of the handle's lifecycle span; its context goes
   out with the call's requests (asb__sb_call). */
static void asb__sb_span_begin(asb_sandbox *sb, asb__span *s, const char *op,
                               asb_latency_kind kind) {
    asb__span_start(sb->client->tracer, s, op, kind, sb->life.t ? &sb->life.ctx : NULL);
    if (s->t) sb->trace_cur = s;
}

static void asb__sb_span_finish(asb_sandbox *sb, asb__span *s, asb_result r,
                                const asb_error *err) {
    if (sb->trace_cur == s) sb->trace_cur = NULL;
    asb__span_end(s, r, err);
}

/* The lifecycle span ends with the handle's use: terminate, close, or
   the client's free. */
static void asb__sb_life_end(asb_sandbox *sb, asb_result r) {
    if (!sb->life.t) return;
    asb__span_str(&sb->life, "sandbox.claim.name", sb->claim);
    asb__span_str(&sb->life, "sandbox.name", sb->name);
    asb__span_str(&sb->life, "sandbox.namespace", sb->ns);
    asb__span_end(&sb->life, r, NULL);
}

ASB_API void asb_sandbox_traceparent(const asb_sandbox *sb, char out[ASB_TRACEPARENT_SIZE]) {
    if (!out) return;
    out[0] = '\0';
    if (sb && sb->life.t) asb_traceparent_format(&sb->life.ctx, out);
}

ASB_API asb_result asb_client_latency(asb_client *c, asb_latency_kind kind, int failed,
                                      asb_latency_stats *out, asb_error *err) {
    asb__tracer *t;
    const asb__hist *h;
    size_t n;
    if (!c || !out || (int)kind < 0 || kind >= ASB_LATENCY_KIND_COUNT)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "latency: NULL argument or unknown kind");
    memset(out, 0, sizeof *out);
    t = c->tracer;
    if (!t)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "latency: the client records none (tracer.enable is 0, or "
                         "OTEL_SDK_DISABLED is true)");
    out->metric = asb__lat_info[kind].metric;
    out->label = asb__lat_info[kind].label;
    out->label_value = asb__lat_info[kind].value;
    asb__lat_bounds(kind, &out->bounds_ms, &n);
    out->bucket_count = n;
    pthread_mutex_lock(&t->lock);
    h = &t->hist[kind][failed ? 1 : 0];
    out->count = h->count;
    out->sum_ms = h->sum;
    out->min_ms = h->min;
    out->max_ms = h->max;
    memcpy(out->buckets, h->buckets, (n + 1) * sizeof out->buckets[0]);
    pthread_mutex_unlock(&t->lock);
    return ASB_OK;
}
#else
#define asb__sb_span_begin(sb, sp, op, kind) ((void)(sb), (sp)->t = NULL)
#define asb__sb_span_finish(sb, s, r, err) ((void)(s), (void)(r), (void)(err))
#define asb__sb_life_end(sb, r) ((void)(sb))
ASB_API void asb_sandbox_traceparent(const asb_sandbox *sb, char out[ASB_TRACEPARENT_SIZE]) {
    (void)sb;
    if (out) out[0] = '\0';
}
ASB_API asb_result asb_client_latency(asb_client *c, asb_latency_kind kind, int failed,
                                      asb_latency_stats *out, asb_error *err) {
    (void)c;
    (void)kind;
    (void)failed;
    if (out) memset(out, 0, sizeof *out);
    return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                     "latency: the library was built with ASB_TRACING 0");
}
#endif


static void asb__handle_free(asb_sandbox *sb);

/* A call the handle's runtime does not have. */
static asb_result asb__unsupported(const asb_sandbox *sb, const char *what, asb_error *err) {
    return asb__fail(err, ASB_ERR_UNSUPPORTED,
                     "%s: sandbox %s runs the %s runtime, which cannot (sandboxd can: "
                     "asb_client_desc.runtime)",
                     what, sb->name, sb->rt->name);
}

/* Headers the client writes itself: an extra header may not repeat them
   (the router reads the first X-Sandbox-ID it sees; two Content-Lengths
   are request smuggling). */
static int asb__reserved_header(const char *name) {
    static const char *const fixed[] = {"X-Request-ID", "Authorization", "Host",
                                        "Transfer-Encoding", "Connection"};
    size_t i, n = strlen(name);
    if ((n >= 10 && asb__ieq(name, 10, "X-Sandbox-")) ||
        (n >= 8 && asb__ieq(name, 8, "Content-")))
        return 1;
    for (i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (asb__ieq(name, n, fixed[i])) return 1;
    return 0;
}

/* asb_http_client_desc.dial for a connector that makes connections. */
static asb_result asb__client_dial(void *user, const char *host, int port, int *fd,
                                   asb_error *err) {
    asb_client *c = (asb_client *)user;
    return c->conn->dial(c, host, port, fd, err);
}

ASB_API asb_result asb_client_create(const asb_client_desc *desc, asb_client **out,
                                     asb_error *err) {
    asb_client_desc zero;
    asb_client *c;
    asb_allocator a;
    asb_result r;
    asb_http_client_desc hd;
    const asb__connector *conn;
    if (!out) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "client: NULL out");
    *out = NULL;
    if (!desc) {
        memset(&zero, 0, sizeof zero);
        desc = &zero;
    }
    conn = asb__connector_of(desc->mode, desc->mode == ASB_CONNECT_IN_POD);
    if (!conn) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "client: unknown connection mode");
    if (conn->check) {
        r = conn->check(desc, err);
        if (r != ASB_OK) return r;
    }
    if (desc->runtime != ASB_RUNTIME_LEGACY && desc->runtime != ASB_RUNTIME_SANDBOXD &&
        desc->runtime != ASB_RUNTIME_AUTO)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "client: unknown runtime");
    if (desc->runtime == ASB_RUNTIME_SANDBOXD && !asb__connector_of(desc->mode, 1))
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "client: the sandboxd runtime is reached with the local tunnel (a "
                         "port-forward to each pod), in-cluster or in-pod, not through a "
                         "router (%s)",
                         conn->name);
    if (desc->sandboxd_rest_port < 0 || desc->sandboxd_rest_port > 65535 ||
        desc->sandboxd_grpc_port < 0 || desc->sandboxd_grpc_port > 65535 ||
        (desc->sandboxd_rest_port && desc->sandboxd_rest_port == desc->sandboxd_grpc_port))
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "client: sandboxd's ports must be 1-65535, and two different ones");
    if (desc->gateway_port < 0 || desc->gateway_port > 65535)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "client: gateway_port must be 1-65535");
#if !ASB_TLS
    if (desc->gateway_https)
        return asb__fail(err, ASB_ERR_TLS_UNAVAILABLE,
                         "client: gateway_https needs TLS, and this build has none (ASB_TLS 0)");
#endif
    if (desc->router_namespace &&
        asb_dns_label_validate(desc->router_namespace, strlen(desc->router_namespace), err) != ASB_OK)
        return ASB_ERR_INVALID_ARGUMENT;
    if (desc->server_port < 0 || desc->server_port > 65535 || desc->router_port < 0 ||
        desc->router_port > 65535)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "client: ports must be 1-65535");
    if (asb__allocator_resolve(desc->kube.http.allocator ? desc->kube.http.allocator
                                                         : desc->kube.kubeconfig.allocator,
                               &a) != ASB_OK)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "allocator: give all three or none");
    c = (asb_client *)a.alloc_fn(sizeof *c, a.user_data);
    if (!c) return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "client: out of memory");
    memset(c, 0, sizeof *c);
    c->alloc = a;
    c->log = desc->log.fn ? desc->log : desc->kube.http.log;
    c->tunnel.err_fd = c->tunnel.out_fd = c->tunnel.life_fd = -1; /* until it is set up */
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->conn_lock, NULL);
    c->conn = conn;
    c->sd_conn = asb__connector_of(desc->mode, 1);
    /* in-pod there is only sandboxd to talk to */
    c->runtime = desc->mode == ASB_CONNECT_IN_POD ? ASB_RUNTIME_SANDBOXD : desc->runtime;
    c->sd_rest_port = desc->sandboxd_rest_port ? desc->sandboxd_rest_port : 8080;
    c->sd_grpc_port = desc->sandboxd_grpc_port ? desc->sandboxd_grpc_port : 9090;
    if (c->sd_rest_port == c->sd_grpc_port) c->sd_grpc_port = c->sd_rest_port == 8080 ? 9090 : 8080;
    if (desc->mode == ASB_CONNECT_IN_POD &&
        (asb__in_pod_addr(desc->sandboxd_rest_addr, "SANDBOXD_REST_ADDR", c->sd_rest_addr,
                          sizeof c->sd_rest_addr, err) != ASB_OK ||
         asb__in_pod_addr(desc->sandboxd_grpc_addr, "SANDBOXD_GRPC_ADDR", c->sd_grpc_addr,
                          sizeof c->sd_grpc_addr, err) != ASB_OK)) {
        asb_client_free(c);
        return ASB_ERR_INVALID_ARGUMENT;
    }
    c->router_port = desc->router_port ? desc->router_port : 8080;
    c->server_port = desc->server_port ? desc->server_port : 8888;
    c->pf_timeout_ms = desc->port_forward_ready_timeout_ms > 0 ? desc->port_forward_ready_timeout_ms
                                                              : 30000;
    c->cleanup = desc->cleanup_on_free;
    c->send_pod_ip = desc->send_pod_ip;
    c->gw_timeout_ms = desc->gateway_ready_timeout_ms > 0 ? desc->gateway_ready_timeout_ms : 180000;
    c->gw_https = desc->gateway_https != 0;
    c->gw_port = desc->gateway_port ? desc->gateway_port : c->gw_https ? 443 : 80;
    if (desc->gateway_name) {
        c->gw_name = asb__cdup(c, desc->gateway_name);
        c->gw_ns = asb__cdup(c, desc->gateway_namespace ? desc->gateway_namespace : "default");
        if (!c->gw_name || !c->gw_ns) {
            asb_client_free(c);
            return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "client: out of memory");
        }
    }
    if (desc->router_token) {
        size_t n = strlen(desc->router_token);
        c->router_auth = (char *)a.alloc_fn(n + 8, a.user_data);
        if (c->router_auth) {
            memcpy(c->router_auth, "Bearer ", 7);
            memcpy(c->router_auth + 7, desc->router_token, n + 1);
        }
        if (!c->router_auth || !asb__header_text_ok(c->router_auth)) {
            asb_client_free(c);
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                             "client: router_token is empty or has CR/LF");
        }
    }
    if (desc->extra_header_count > 12) {
        asb_client_free(c);
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "client: at most 12 extra headers (got %zu)", desc->extra_header_count);
    }
    if (desc->extra_header_count) {
        size_t i;
        c->extra = (asb_http_header *)a.alloc_fn(desc->extra_header_count * sizeof(asb_http_header),
                                                 a.user_data);
        if (!c->extra) {
            asb_client_free(c);
            return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "client: out of memory");
        }
        memset(c->extra, 0, desc->extra_header_count * sizeof(asb_http_header));
        c->extra_count = desc->extra_header_count;
        for (i = 0; i < desc->extra_header_count; i++) {
            const asb_http_header *h = &desc->extra_headers[i];
            if (!h->name || !h->value || !asb__header_text_ok(h->name) ||
                !asb__header_text_ok(h->value)) {
                asb_client_free(c);
                return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                                 "client: extra header %zu is NULL or has CR/LF", i);
            }
            if (asb__reserved_header(h->name)) {
                char q[80];
                asb__quote(q, sizeof q, h->name, strlen(h->name), 60);
                asb_client_free(c);
                return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                                 "client: extra header \"%s\" is one the library sets itself "
                                 "(a second copy would shadow or contradict it)",
                                 q);
            }
            c->extra[i].name = asb__cdup(c, h->name);
            c->extra[i].value = asb__cdup(c, h->value);
            if (!c->extra[i].name || !c->extra[i].value) {
                asb_client_free(c);
                return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "client: out of memory");
            }
        }
    }
    c->max_output = desc->max_output_bytes ? desc->max_output_bytes : (size_t)16 << 20;
    c->max_read = desc->max_read_bytes ? desc->max_read_bytes : (size_t)256 << 20;
    c->router_ns = asb__cdup(c, desc->router_namespace ? desc->router_namespace
                                                       : "agent-sandbox-system");
    c->router_svc = asb__cdup(c, desc->router_service ? desc->router_service
                                                      : "sandbox-router-svc");
    c->kubectl = asb__cdup(c, desc->kubectl_path ? desc->kubectl_path : "kubectl");
    c->api_version = desc->claim_api_version ? asb__cdup(c, desc->claim_api_version) : NULL;
    if (desc->direct_url) {
        size_t n = strlen(desc->direct_url);
        c->direct_url = asb__cdup(c, desc->direct_url);
        while (c->direct_url && n && c->direct_url[n - 1] == '/') c->direct_url[--n] = '\0';
    }
    if (!c->router_ns || !c->router_svc || !c->kubectl ||
        (desc->claim_api_version && !c->api_version) || (desc->direct_url && !c->direct_url)) {
        asb_client_free(c);
        return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "client: out of memory");
    }
    r = ASB_OK;
    if (desc->mode != ASB_CONNECT_IN_POD) { /* in-pod: no Kubernetes API at all */
        asb_kube_client_desc kd = desc->kube;
        kd.http.log = c->log;
        r = asb_kube_client_create(&kd, &c->kube, err);
    }
    if (r != ASB_OK) {
        asb_client_free(c);
        return r;
    }
    /* kubectl must use the same configuration and context as we do */
    if (c->kube && desc->kube.kubeconfig.path)
        c->kube_path = asb__cdup(c, desc->kube.kubeconfig.path);
    if (c->kube && !c->kube->in_cluster)
        c->kube_context = asb__cdup(c, asb_kube_client_config(c->kube)->context);
    if (c->kube && !c->kube->in_cluster && !desc->kube.kubeconfig.path &&
        desc->kube.kubeconfig.path_count) {
        /* kubectl gets the same list, in its own KUBECONFIG */
        asb_buf kb;
        size_t i;
        asb_buf_init(&kb, &c->alloc);
        r = asb_buf_append(&kb, "KUBECONFIG=", 11);
        for (i = 0; r == ASB_OK && i < desc->kube.kubeconfig.path_count; i++) {
            const char *kp = desc->kube.kubeconfig.paths[i];
            if (strchr(kp, ':') && c->conn->uses_kubectl) {
                asb_buf_free(&kb);
                asb_client_free(c);
                return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                                 "kubeconfig.paths[%zu] holds a ':', which kubectl's "
                                 "KUBECONFIG list cannot carry (the local tunnel needs it)",
                                 i);
            }
            if (i) r = asb_buf_append(&kb, ":", 1);
            if (r == ASB_OK) r = asb_buf_append(&kb, kp, strlen(kp));
        }
        if (r == ASB_OK) r = asb_buf_append(&kb, "", 1);
        if (r != ASB_OK) {
            asb_buf_free(&kb);
            asb_client_free(c);
            return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "client: out of memory");
        }
        c->kube_env = kb.ptr; /* ownership moves to the client */
    }
    /* the kube client's timeouts and limits, but TLS of the sandbox side:
       the kubeconfig's CA and client certificate are the API server's */
    hd = desc->kube.http;
    hd.tls = desc->sandbox_tls;
    hd.proxy_url = NULL; /* the kubeconfig's proxy is for the apiserver */
    hd.proxy_from_environment = 0;
    hd.allocator = &c->alloc;
    hd.log = c->log;
    if (!hd.max_body_bytes) hd.max_body_bytes = c->max_output;
    if (conn->dial) { /* the connector makes the connections */
        hd.dial = asb__client_dial;
        hd.dial_user_data = c;
    }
    r = asb_http_client_create(&hd, &c->http, err);
    if (r == ASB_ERR_TLS_CONFIG && err) {
        /* the kubeconfig's CA fails with the same words: say which one */
        char m[ASB_ERROR_MESSAGE_SIZE];
        memcpy(m, err->message, sizeof m);
        snprintf(err->message, sizeof err->message, "sandbox_tls: %.*s",
                 (int)sizeof m - 20, m);
    }
#if ASB_TRACING
    if (r == ASB_OK) r = asb__tracer_create(&desc->tracer, &c->alloc, &c->log, &c->tracer, err);
#else
    if (r == ASB_OK && desc->tracer.enable)
        r = asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                      "client: tracer.enable, but the library was built with ASB_TRACING 0");
#endif
    if (r != ASB_OK) {
        asb_client_free(c);
        return r;
    }
    /* sandboxd's gRPC connections: the client's allocator, log and
       connect timeout */
    c->h2_desc.allocator = &c->alloc;
    c->h2_desc.log = c->log;
    c->h2_desc.connect_timeout_ms = desc->kube.http.connect_timeout_ms;
    {
        /* the local tunnel's, stopped until the first claim */
        int rp = c->router_port;
        asb__tunnel_init(&c->tunnel, c, "svc", c->router_svc, c->router_ns, &rp, 1,
                         ", or use ASB_CONNECT_DIRECT with the router's URL");
    }
    *out = c;
    return ASB_OK;
}

/* The claim API version: given, or the cluster's preferred one from
   discovery (asked once, then kept). */
static asb_result asb__api_version(asb_client *c, asb_error *err) {
    asb_buf body;
    asb_json_doc d;
    asb_result r;
    char gv[128] = "";
    const char *slash;
    int known;
    /* under the lock: another thread may be writing it (read once here,
       it never changes again, so the callers' later reads are ordered) */
    if (!c->kube)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "client: ASB_CONNECT_IN_POD has no Kubernetes API (no claims to make, "
                         "attach, list or delete): use asb_client_sandbox_in_pod");
    pthread_mutex_lock(&c->lock);
    known = c->api_version != NULL;
    pthread_mutex_unlock(&c->lock);
    if (known) return ASB_OK;
    asb_buf_init(&body, &c->alloc);
    r = asb_kube_request(c->kube, "GET", "/apis/extensions.agents.x-k8s.io", NULL, NULL, 0, &body,
                         err);
    if (r == ASB_ERR_NOT_FOUND)
        r = asb__fail(err, ASB_ERR_NOT_FOUND,
                      "the cluster does not serve extensions.agents.x-k8s.io: is agent-sandbox "
                      "installed with its extensions (SandboxClaim) CRDs?");
    if (r == ASB_OK && asb_json_doc_parse(&d, body.ptr, body.len, &c->alloc, err) == ASB_OK) {
        asb_json_get_string(&d, asb_json_find(&d, 0, "preferredVersion.groupVersion"), gv,
                            sizeof gv, NULL);
        asb_json_doc_free(&d);
    }
    asb_buf_free(&body);
    if (r != ASB_OK) return r;
    slash = strchr(gv, '/');
    if (!slash || !slash[1])
        return asb__fail(err, ASB_ERR_KUBE_API, "API discovery gave no preferred version");
    pthread_mutex_lock(&c->lock);
    if (!c->api_version) c->api_version = asb__cdup(c, slash + 1);
    known = c->api_version != NULL;
    pthread_mutex_unlock(&c->lock);
    return known ? ASB_OK : asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "out of memory");
}

static const asb_kube_resource *asb__claims(asb_client *c, asb_kube_resource *res) {
    res->group = "extensions.agents.x-k8s.io";
    res->version = c->api_version;
    res->plural = "sandboxclaims";
    return res;
}

ASB_API void asb_client_free(asb_client *c) {
    asb_sandbox *s;
    if (!c) return;
    if (c->conn && c->conn->stop) c->conn->stop(c);
    while ((s = c->handles) != NULL) {
        c->handles = s->next;
        if (c->cleanup && s->active && !s->named && c->kube) {
            /* a claim the caller named is theirs: closed, never deleted */
            asb_kube_resource res;
            asb__span d;
            asb_result dr;
            asb_error derr;
            asb__sb_span_begin(s, &d, "delete_claim", ASB_LATENCY_DELETE);
            asb__span_str(&d, "sandbox.claim.name", s->claim);
            dr = asb_kube_delete_uid(c->kube, asb__claims(c, &res), s->ns, s->claim, s->uid,
                                     &derr);
            asb__sb_span_finish(s, &d, dr == ASB_ERR_NOT_FOUND ? ASB_OK : dr, &derr);
        }
        asb__sb_life_end(s, ASB_OK);
        asb__handle_free(s);
    }
    asb__tracer_free(c->tracer); /* flushes: the last spans are the lifecycles above */
    asb_http_client_free(c->http);
    asb_kube_client_free(c->kube);
    if (c->direct_url) c->alloc.free_fn(c->direct_url, c->alloc.user_data);
    if (c->router_ns) c->alloc.free_fn(c->router_ns, c->alloc.user_data);
    if (c->router_svc) c->alloc.free_fn(c->router_svc, c->alloc.user_data);
    if (c->kubectl) c->alloc.free_fn(c->kubectl, c->alloc.user_data);
    if (c->api_version) c->alloc.free_fn(c->api_version, c->alloc.user_data);
    if (c->kube_path) c->alloc.free_fn(c->kube_path, c->alloc.user_data);
    if (c->kube_context) c->alloc.free_fn(c->kube_context, c->alloc.user_data);
    if (c->kube_env) c->alloc.free_fn(c->kube_env, c->alloc.user_data);
    if (c->gw_name) c->alloc.free_fn(c->gw_name, c->alloc.user_data);
    if (c->gw_ns) c->alloc.free_fn(c->gw_ns, c->alloc.user_data);
    if (c->router_auth) asb__free_secret(&c->alloc, c->router_auth, strlen(c->router_auth));
    if (c->extra) {
        size_t i;
        for (i = 0; i < c->extra_count; i++) {
            if (c->extra[i].name) c->alloc.free_fn((char *)c->extra[i].name, c->alloc.user_data);
            if (c->extra[i].value) /* may be an API key */
                asb__free_secret(&c->alloc, (char *)c->extra[i].value,
                                 strlen(c->extra[i].value));
        }
        c->alloc.free_fn(c->extra, c->alloc.user_data);
    }
    pthread_mutex_destroy(&c->conn_lock);
    pthread_mutex_destroy(&c->lock);
    c->alloc.free_fn(c, c->alloc.user_data);
}

/* -- the Sandbox object: pod, hash, status, IP ------------------------------------ */

static const asb_kube_resource *asb__sandboxes(asb_client *c, asb_kube_resource *res) {
    res->group = "agents.x-k8s.io";
    res->version = c->api_version;
    res->plural = "sandboxes";
    return res;
}

/* Whether an address may be a pod's: not unspecified, link-local
   (169.254/16, the cloud metadata service's range; fe80::/10) or
   multicast (224/4, ff00::/8). The same classes the sandbox-router
   answers 400 for, and in-cluster mode would dial the address itself.
   Loopback stays: the router decides that one (--allow-loopback-pod-ip),
   and local clusters and sidecars use it. */
static int asb__pod_ip_usable(const unsigned char *a, int kind) {
    static const unsigned char zero[16] = {0};
    if (kind == 4)
        return memcmp(a, zero, 4) != 0 && !(a[0] == 169 && a[1] == 254) && (a[0] & 0xf0) != 224;
    return memcmp(a, zero, 16) != 0 && !(a[0] == 0xfe && (a[1] & 0xc0) == 0x80) && a[0] != 0xff;
}

/* Picks the pod IP as PROTOCOL §1 says: the first valid IPv4 (mapped
   IPv6 unmapped), else the first valid IPv6, skipping anything else
   (malformed, or not usable as a pod IP: asb__pod_ip_usable). */
static int asb__choose_pod_ip(const asb_json_doc *d, int list, char out[ASB_IP_SIZE]) {
    asb_json_iter it;
    int item, have6 = 0;
    char v6[ASB_IP_SIZE] = "";
    it = asb_json_iter_begin(d, list);
    while (asb_json_iter_next(d, &it, NULL, &item)) {
        char ip[ASB_IP_SIZE];
        unsigned char bin[16];
        int kind;
        /* entries are strings, or {"ip": "..."} objects in some versions */
        int s = d->toks[item].type == ASB_JSON_OBJECT ? asb_json_member(d, item, "ip", 2) : item;
        size_t n = 0;
        if (asb_json_get_string(d, s, ip, sizeof ip, &n) != ASB_OK || n != strlen(ip)) continue;
        kind = asb__ip_literal(ip, n, bin);
        if (kind == 4) {
            if (!asb__pod_ip_usable(bin, 4)) continue;
            snprintf(out, ASB_IP_SIZE, "%s", ip);
            return 4;
        }
        if (kind == 6) {
            static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
            if (memcmp(bin, mapped, 12) == 0) {
                if (!asb__pod_ip_usable(bin + 12, 4)) continue;
                snprintf(out, ASB_IP_SIZE, "%u.%u.%u.%u", bin[12], bin[13], bin[14], bin[15]);
                return 4;
            }
            if (!asb__pod_ip_usable(bin, 6)) continue;
            if (!have6) {
                have6 = 1;
                snprintf(v6, sizeof v6, "%s", ip);
            }
        }
    }
    if (have6) {
        snprintf(out, ASB_IP_SIZE, "%s", v6);
        return 6;
    }
    return 0;
}

/* Whether a pod spec (a JSON object) declares sandboxd, as ASB_RUNTIME_AUTO
   reads it: a container (or init container: a native sidecar) named
   "sandboxd", or one with SANDBOXD_REST_ADDR / SANDBOXD_GRPC_ADDR in its
   env, as sandboxd's user guide lays a pod out. */
static int asb__spec_declares_sandboxd(const asb_json_doc *d, int spec) {
    static const char *const lists[] = {"containers", "initContainers"};
    size_t l;
    for (l = 0; l < 2; l++) {
        asb_json_iter it = asb_json_iter_begin(d, asb_json_member(d, spec, lists[l],
                                                                  strlen(lists[l])));
        int ctr;
        while (asb_json_iter_next(d, &it, NULL, &ctr)) {
            asb_json_iter ei;
            int e;
            if (asb_json_string_eq(d, asb_json_member(d, ctr, "name", 4), "sandboxd", 8)) return 1;
            ei = asb_json_iter_begin(d, asb_json_member(d, ctr, "env", 3));
            while (asb_json_iter_next(d, &ei, NULL, &e)) {
                int n = asb_json_member(d, e, "name", 4);
                if (asb_json_string_eq(d, n, "SANDBOXD_REST_ADDR", 18) ||
                    asb_json_string_eq(d, n, "SANDBOXD_GRPC_ADDR", 18))
                    return 1;
            }
        }
    }
    return 0;
}

/* Fills the handle's pod name and name hash from its Sandbox object, and
   *sandboxd from its pod template (the template's, as the controller
   copied it). */
static asb_result asb__sb_describe(asb_sandbox *sb, asb_buf *body, int *sandboxd,
                                   asb_error *err) {
    asb_kube_resource res;
    asb_json_doc d;
    asb_result r = asb_kube_get(sb->client->kube, asb__sandboxes(sb->client, &res), sb->ns, sb->name,
                                body, err);
    if (r != ASB_OK) return r;
    if (asb_json_doc_parse(&d, body->ptr, body->len, &sb->client->alloc, err) != ASB_OK)
        return ASB_ERR_JSON_INVALID;
    if (asb_json_get_string(&d,
                            asb_json_find(&d, 0, "metadata.annotations.agents\\.x-k8s\\.io/pod-name"),
                            sb->pod, sizeof sb->pod, NULL) != ASB_OK)
        snprintf(sb->pod, sizeof sb->pod, "%s", sb->name);
    *sandboxd = asb__spec_declares_sandboxd(&d, asb_json_find(&d, 0, "spec.podTemplate.spec"));
    {
        char sel[300] = "";
        const char *h;
        asb_json_get_string(&d, asb_json_find(&d, 0, "status.selector"), sel, sizeof sel, NULL);
        h = strstr(sel, "agents.x-k8s.io/sandbox-name-hash=");
        sb->hash[0] = '\0';
        if (h) {
            size_t k = 0;
            h += 34;
            while (h[k] && h[k] != ',' && k + 1 < sizeof sb->hash) {
                sb->hash[k] = h[k];
                k++;
            }
            sb->hash[k] = '\0';
        }
    }
    asb_json_doc_free(&d);
    return ASB_OK;
}

ASB_API const char *asb_sandbox_pod_name(const asb_sandbox *sb) { return sb ? sb->pod : NULL; }
ASB_API const char *asb_sandbox_name_hash(const asb_sandbox *sb) { return sb ? sb->hash : NULL; }

ASB_API asb_result asb_sandbox_status(asb_sandbox *sb, asb_sandbox_state *state, char *msg,
                                      size_t cap, asb_error *err) {
    asb_kube_resource res;
    asb_buf body;
    asb_json_doc d;
    asb_json_iter it;
    int cond;
    asb_result r;
    if (!sb || !state) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "status: NULL argument");
    if (!sb->client->kube)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "status: an in-pod handle has no Sandbox");
    if (msg && cap) msg[0] = '\0';
    asb_buf_init(&body, &sb->client->alloc);
    r = asb_kube_get(sb->client->kube, asb__sandboxes(sb->client, &res), sb->ns, sb->name, &body,
                     err);
    if (r == ASB_ERR_NOT_FOUND) {
        *state = ASB_SANDBOX_NOT_FOUND;
        asb_buf_free(&body);
        return ASB_OK;
    }
    if (r != ASB_OK) {
        asb_buf_free(&body);
        return r;
    }
    *state = ASB_SANDBOX_NOT_READY;
    if (asb_json_doc_parse(&d, body.ptr, body.len, &sb->client->alloc, err) == ASB_OK) {
        int seen = 0;
        it = asb_json_iter_begin(&d, asb_json_find(&d, 0, "status.conditions"));
        while (asb_json_iter_next(&d, &it, NULL, &cond)) {
            if (!asb_json_string_eq(&d, asb_json_member(&d, cond, "type", 4), "Ready", 5)) continue;
            seen = 1;
            if (asb_json_string_eq(&d, asb_json_member(&d, cond, "status", 6), "True", 4))
                *state = ASB_SANDBOX_READY;
            if (msg && cap)
                asb_json_get_string(&d, asb_json_member(&d, cond, "message", 7), msg, cap, NULL);
        }
        /* no Ready condition yet (the controller has not looked at it):
           the reference's words for that */
        if (!seen && msg && cap) snprintf(msg, cap, "%s", "Unknown message");
        asb_json_doc_free(&d);
    } else {
        r = ASB_ERR_JSON_INVALID;
    }
    asb_buf_free(&body);
    return r;
}

ASB_API asb_result asb_sandbox_pod_ip(asb_sandbox *sb, char out[ASB_IP_SIZE], asb_error *err) {
    asb_kube_resource res;
    asb_buf body;
    asb_json_doc d;
    asb_result r;
    if (!sb || !out) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "pod_ip: NULL argument");
    out[0] = '\0';
    if (!sb->client->kube)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "pod_ip: an in-pod handle has no Sandbox");
    asb_buf_init(&body, &sb->client->alloc);
    r = asb_kube_get(sb->client->kube, asb__sandboxes(sb->client, &res), sb->ns, sb->name, &body,
                     err);
    if (r == ASB_OK) {
        if (asb_json_doc_parse(&d, body.ptr, body.len, &sb->client->alloc, err) != ASB_OK) {
            r = ASB_ERR_JSON_INVALID;
        } else {
            if (!asb__choose_pod_ip(&d, asb_json_find(&d, 0, "status.podIPs"), out))
                r = asb__fail(err, ASB_ERR_NOT_FOUND, "sandbox %s has no valid pod IP yet",
                              sb->name);
            asb_json_doc_free(&d);
        }
    }
    asb_buf_free(&body);
    return r;
}

/* A new handle (not yet in the registry) with its pod name and hash read
   from the Sandbox; if that read fails the defaults stand (the sandbox
   name, no hash) rather than failing a ready sandbox. NULL: no memory. */
static asb_sandbox *asb__new_handle(asb_client *c, const char *claim, const char *name,
                                    const char *ns) {
    asb_sandbox *sb = (asb_sandbox *)c->alloc.alloc_fn(sizeof *sb, c->alloc.user_data);
    asb_buf body;
    int sandboxd = 0;
    if (!sb) return NULL;
    memset(sb, 0, sizeof *sb);
    sb->client = c;
    pthread_mutex_init(&sb->conn_lock, NULL);
    pthread_mutex_init(&sb->h2_lock, NULL);
    snprintf(sb->claim, sizeof sb->claim, "%s", claim);
    snprintf(sb->name, sizeof sb->name, "%s", name);
    snprintf(sb->ns, sizeof sb->ns, "%s", ns);
    sb->active = 1;
    asb_buf_init(&body, &c->alloc);
    if (asb__sb_describe(sb, &body, &sandboxd, NULL) != ASB_OK)
        snprintf(sb->pod, sizeof sb->pod, "%s", sb->name);
    asb_buf_free(&body);
    /* the runtime: the client's choice, or with AUTO the pod's */
    if (c->runtime == ASB_RUNTIME_AUTO && sandboxd && !c->sd_conn) {
        asb__log(&c->log, ASB_LOG_WARN, "sandbox.runtime",
                 "sandbox %s/%s declares sandboxd, which %s cannot reach: the legacy runtime "
                 "it is",
                 ns, name, c->conn->name);
        sandboxd = 0;
    }
    if (c->runtime == ASB_RUNTIME_SANDBOXD || (c->runtime == ASB_RUNTIME_AUTO && sandboxd)) {
        sb->rt = &asb__runtime_sandboxd;
        sb->conn = c->sd_conn;
    } else {
        sb->rt = &asb__runtime_legacy;
        sb->conn = c->conn;
    }
    return sb;
}

/* Frees a handle and what its connection holds (a pod tunnel, gRPC
   connections). */
static void asb__handle_free(asb_sandbox *sb) {
    asb_allocator a = sb->client->alloc;
    size_t i;
    if (sb->conn && sb->conn->release) sb->conn->release(sb);
    asb_h2_conn_free(sb->h2);
    for (i = 0; i < sb->h2_old_count; i++) asb_h2_conn_free(sb->h2_old[i]);
    if (sb->h2_old) a.free_fn(sb->h2_old, a.user_data);
    pthread_mutex_destroy(&sb->h2_lock);
    pthread_mutex_destroy(&sb->conn_lock);
    a.free_fn(sb, a.user_data);
}

/* What the claim watch learned. */
typedef struct asb__claim_wait {
    char sandbox[256];
    char reason[64];
    char message[200];
    char uid[64]; /* ours, when known: events of another UID are not ours */
    asb_result outcome;
} asb__claim_wait;

/* Ready=False reasons the controllers never recover from on their own
   (the claim controller's own, and the Sandbox's it forwards): waiting
   out the deadline cannot succeed, so the wait fails at once with the
   controller's message. The same set as the Python SDK 1.0.8; the
   transient ones (SandboxNotReady, AdoptionPending, ReconcilerError...)
   are absent on purpose: the controller retries those. */
static int asb__claim_reason_terminal(const char *reason) {
    static const char *const terminal[] = {
        "InvalidMetadata",  "EnvVarsInjectionRejected", "VolumeClaimTemplatesError",
        "ClaimExpired",     "SandboxExpired",           "InvalidConfiguration",
        "PodFailed",        "PodSucceeded"};
    size_t i;
    for (i = 0; i < sizeof terminal / sizeof terminal[0]; i++)
        if (strcmp(reason, terminal[i]) == 0) return 1;
    return 0;
}

static int asb__claim_event(void *ud, const asb_watch_event *ev) {
    asb__claim_wait *w = (asb__claim_wait *)ud;
    const asb_json_doc *d = ev->doc;
    int nm, conds, cond;
    asb_json_iter it;
    char uid[64] = "";
    if (ev->type != ASB_WATCH_ADDED && ev->type != ASB_WATCH_MODIFIED &&
        ev->type != ASB_WATCH_DELETED)
        return 0;
    asb_json_get_string(d, asb_json_find(d, ev->object, "metadata.uid"), uid, sizeof uid, NULL);
    if (w->uid[0] && uid[0] && strcmp(uid, w->uid) != 0) {
        /* a claim of the same name but not ours: ours was deleted and
           another made in its place. Its end is not ours; its life means
           ours is gone (names are unique), so the wait ends, never
           taking it for ours */
        if (ev->type == ASB_WATCH_DELETED) return 0;
        w->outcome = ASB_ERR_NOT_FOUND;
        w->reason[0] = '\0';
        snprintf(w->message, sizeof w->message,
                 "the claim was replaced by another of the same name (uid %.64s, ours %.64s)",
                 uid, w->uid);
        asb__scrub_controls(w->message); /* the uid is the server's text */
        return 1;
    }
    if (ev->type == ASB_WATCH_DELETED) {
        w->outcome = ASB_ERR_METADATA;
        w->reason[0] = '\0';
        snprintf(w->message, sizeof w->message, "the claim was deleted while waiting for it");
        return 1;
    }
    if (w->uid[0] && asb_json_find(d, ev->object, "metadata.deletionTimestamp") >= 0) {
        w->outcome = ASB_ERR_METADATA;
        w->reason[0] = '\0';
        snprintf(w->message, sizeof w->message, "the claim is being deleted");
        return 1;
    }
    nm = asb_json_find(d, ev->object, "status.sandbox.name");
    if (nm < 0) nm = asb_json_find(d, ev->object, "status.sandbox.Name"); /* old controllers */
    if (nm >= 0) {
        /* the name goes into API paths and router headers: a cut one
           (over 253) or one that is no object name ("../x") is no name */
        size_t n = 0, i;
        int ok = asb_json_get_string(d, nm, w->sandbox, sizeof w->sandbox, &n) == ASB_OK &&
                 n >= 1 && n <= 253 && n == strlen(w->sandbox) &&
                 strcmp(w->sandbox, ".") != 0 && strcmp(w->sandbox, "..") != 0;
        for (i = 0; ok && i < n; i++)
            ok = asb__is_lower_alnum((unsigned char)w->sandbox[i]) || w->sandbox[i] == '-' ||
                 w->sandbox[i] == '.';
        if (!ok) w->sandbox[0] = '\0';
    }
    conds = asb_json_find(d, ev->object, "status.conditions");
    it = asb_json_iter_begin(d, conds);
    while (asb_json_iter_next(d, &it, NULL, &cond)) {
        if (!asb_json_string_eq(d, asb_json_member(d, cond, "type", 4), "Ready", 5)) continue;
        w->reason[0] = w->message[0] = '\0';
        asb_json_get_string(d, asb_json_member(d, cond, "reason", 6), w->reason, sizeof w->reason, NULL);
        asb_json_get_string(d, asb_json_member(d, cond, "message", 7), w->message,
                            sizeof w->message, NULL);
        asb__scrub_controls(w->reason); /* both go into err->message */
        asb__scrub_controls(w->message);
        if (asb_json_string_eq(d, asb_json_member(d, cond, "status", 6), "True", 4)) {
            if (w->sandbox[0]) {
                w->outcome = ASB_OK;
                return 1;
            }
        } else if (strcmp(w->reason, "TemplateNotFound") == 0) {
            w->outcome = ASB_ERR_TEMPLATE_NOT_FOUND;
            return 1;
        } else if (strcmp(w->reason, "WarmPoolNotFound") == 0) {
            w->outcome = ASB_ERR_WARMPOOL_NOT_FOUND;
            return 1;
        } else if (asb__claim_reason_terminal(w->reason)) {
            w->outcome = ASB_ERR_CLAIM_FAILED;
            return 1;
        }
    }
    return 0;
}

/* Whether a failed claim create may have created the claim all the same:
   the request went out and only the answer was lost (a cut connection, a
   timeout, a 5xx from the apiserver or a proxy before it). A 4xx is the
   apiserver's refusal (409: the name is someone else's, never to be
   deleted); DNS, connect, proxy and TLS failures never sent the request,
   and a POST is retried only when it never reached the server. */
static int asb__create_may_have_landed(asb_result r, const asb_error *e) {
    if (e->http_status >= 400 && e->http_status < 500) return 0;
    if (e->http_status >= 500) return 1;
    return r == ASB_ERR_SEND || r == ASB_ERR_RECV || r == ASB_ERR_TIMEOUT ||
           r == ASB_ERR_CANCELLED || r == ASB_ERR_HTTP_PROTOCOL ||
           r == ASB_ERR_HTTP_SHORT_BODY || r == ASB_ERR_TOO_LARGE || r == ASB_ERR_IO;
}

static asb_result asb__claim_manifest(asb_client *c, const char *claim, const char *tpl,
                                      const asb_create_opts *o, const char *ns, asb_buf *b,
                                      asb__span *trace, asb_error *err) {
    asb_json_writer w;
    char now[ASB_TIME_SIZE], shut[ASB_TIME_SIZE], av[128];
    size_t i;
    asb_time_format_rfc3339((int64_t)time(NULL), now);
    if (o->shutdown_after_seconds &&
        asb_shutdown_time_from_ttl((int64_t)time(NULL), o->shutdown_after_seconds, shut, err) !=
            ASB_OK)
        return ASB_ERR_INVALID_ARGUMENT;
    snprintf(av, sizeof av, "extensions.agents.x-k8s.io/%s", c->api_version);
    asb_json_writer_init(&w, b);
    asb_json_object_begin(&w);
    asb_json_key(&w, "apiVersion");
    asb_json_string(&w, av);
    asb_json_key(&w, "kind");
    asb_json_string(&w, "SandboxClaim");
    asb_json_key(&w, "metadata");
    asb_json_object_begin(&w);
    asb_json_key(&w, "name");
    asb_json_string(&w, claim);
    asb_json_key(&w, "namespace");
    asb_json_string(&w, ns);
    asb_json_key(&w, "labels");
    asb_json_object_begin(&w);
    for (i = 0; i < o->label_count; i++) {
        asb_json_key(&w, o->labels[i].key);
        asb_json_string(&w, o->labels[i].value);
    }
    asb_json_key(&w, "agents.x-k8s.io/created-by");
    asb_json_string(&w, "agentsandbox.h");
    asb_json_object_end(&w);
    asb_json_key(&w, "annotations");
    asb_json_object_begin(&w);
    asb_json_key(&w, "agents.x-k8s.io/client-first-requested-at");
    asb_json_string(&w, now);
    asb__trace_annotation(trace, &w);
    asb_json_object_end(&w);
    asb_json_object_end(&w);
    asb_json_key(&w, "spec");
    asb_json_object_begin(&w);
    /* v1beta1 options (refused on v1alpha1 before this), empty ones left
       out as the reference does */
    if (o->env_count) {
        asb_json_key(&w, "env");
        asb_json_array_begin(&w);
        for (i = 0; i < o->env_count; i++) {
            asb_json_object_begin(&w);
            asb_json_key(&w, "name");
            asb_json_string(&w, o->env[i].name);
            asb_json_key(&w, "value");
            asb_json_string(&w, o->env[i].value ? o->env[i].value : "");
            if (o->env[i].container_name && *o->env[i].container_name) {
                asb_json_key(&w, "containerName");
                asb_json_string(&w, o->env[i].container_name);
            }
            asb_json_object_end(&w);
        }
        asb_json_array_end(&w);
    }
    if (o->pod_label_count || o->pod_annotation_count) {
        asb_json_key(&w, "additionalPodMetadata");
        asb_json_object_begin(&w);
        if (o->pod_label_count) {
            asb_json_key(&w, "labels");
            asb_json_object_begin(&w);
            for (i = 0; i < o->pod_label_count; i++) {
                asb_json_key(&w, o->pod_labels[i].key);
                asb_json_string(&w, o->pod_labels[i].value);
            }
            asb_json_object_end(&w);
        }
        if (o->pod_annotation_count) {
            asb_json_key(&w, "annotations");
            asb_json_object_begin(&w);
            for (i = 0; i < o->pod_annotation_count; i++) {
                asb_json_key(&w, o->pod_annotations[i].key);
                asb_json_string(&w, o->pod_annotations[i].value);
            }
            asb_json_object_end(&w);
        }
        asb_json_object_end(&w);
    }
    if (o->volume_claim_template_count) {
        asb_json_key(&w, "volumeClaimTemplates");
        asb_json_array_begin(&w);
        for (i = 0; i < o->volume_claim_template_count; i++) /* parsed: objects */
            asb__w_raw(&w, o->volume_claim_templates[i], strlen(o->volume_claim_templates[i]));
        asb_json_array_end(&w);
    }
    if (o->warm_pool) {
        asb_json_key(&w, "warmPoolRef"); /* v1beta1: the pool names the template */
        asb_json_object_begin(&w);
        asb_json_key(&w, "name");
        asb_json_string(&w, o->warm_pool);
        asb_json_object_end(&w);
    } else {
        asb_json_key(&w, "sandboxTemplateRef");
        asb_json_object_begin(&w);
        asb_json_key(&w, "name");
        asb_json_string(&w, tpl);
        asb_json_object_end(&w);
    }
    if (o->warmpool) {
        asb_json_key(&w, "warmpool");
        asb_json_string(&w, o->warmpool);
    }
    if (o->shutdown_after_seconds) {
        asb_json_key(&w, "lifecycle");
        asb_json_object_begin(&w);
        asb_json_key(&w, "shutdownTime");
        asb_json_string(&w, shut);
        asb_json_key(&w, "shutdownPolicy");
        asb_json_string(&w, "Delete");
        asb_json_object_end(&w);
        asb__span_str_copy(trace, "sandbox.lifecycle.shutdown_time", shut);
        asb__span_str(trace, "sandbox.lifecycle.shutdown_policy", "Delete");
    }
    asb_json_object_end(&w);
    asb_json_object_end(&w);
    if (asb_json_writer_finish(&w) != ASB_OK)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "claim: cannot build the manifest");
    return ASB_OK;
}

/* The options' own rules, before any API call. */
static asb_result asb__create_opts_check(const asb_create_opts *o, asb_error *err) {
    size_t i;
    if (o->claim_name &&
        asb_claim_name_validate(o->claim_name, strlen(o->claim_name), err) != ASB_OK)
        return ASB_ERR_INVALID_ARGUMENT;
    if (o->adopt_existing && !o->claim_name)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "create: adopt_existing needs a claim_name (a generated name is "
                         "never there to adopt)");
    if (o->env_count && !o->env)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "create: env is NULL");
    for (i = 0; i < o->env_count; i++)
        if (asb_env_name_validate(o->env[i].name, o->env[i].name ? strlen(o->env[i].name) : 0,
                                  err) != ASB_OK)
            return ASB_ERR_INVALID_ARGUMENT;
    if (asb_labels_validate(o->pod_labels, o->pod_label_count, err) != ASB_OK) {
        if (err) {
            char m[ASB_ERROR_MESSAGE_SIZE];
            memcpy(m, err->message, sizeof m);
            snprintf(err->message, sizeof err->message, "pod_labels: %.490s", m);
        }
        return ASB_ERR_INVALID_ARGUMENT;
    }
    if (o->pod_annotation_count && !o->pod_annotations)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "create: pod_annotations is NULL");
    for (i = 0; i < o->pod_annotation_count; i++)
        if (!o->pod_annotations[i].key || !*o->pod_annotations[i].key ||
            !o->pod_annotations[i].value)
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                             "pod_annotations: entry %zu has an empty key or a NULL value", i);
    if (o->volume_claim_template_count && !o->volume_claim_templates)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "create: volume_claim_templates is NULL");
    for (i = 0; i < o->volume_claim_template_count; i++) {
        const char *js = o->volume_claim_templates[i];
        asb_json_doc d;
        asb_error perr;
        int obj;
        if (!js) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "volume_claim_templates[%zu] is NULL", i);
        if (asb_json_doc_parse(&d, js, strlen(js), NULL, &perr) != ASB_OK)
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                             "volume_claim_templates[%zu] is not JSON: %.300s", i, perr.message);
        obj = d.count > 0 && d.toks[0].type == ASB_JSON_OBJECT;
        asb_json_doc_free(&d);
        if (!obj)
            return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                             "volume_claim_templates[%zu] must be a JSON object (a "
                             "PersistentVolumeClaimTemplate)",
                             i);
    }
    return ASB_OK;
}

static asb_sandbox *asb__find_handle(asb_client *c, const char *ns, const char *claim);

/* adopt_existing: the claim that was there must be one we may wait on
   (the same template or pool, not on its way out, with the identity the
   wait pins to); its rv and uid go to the wait. */
static asb_result asb__adopt_check(asb_client *c, const char *claim, const char *tpl,
                                   const asb_create_opts *o, const asb_buf *body,
                                   asb__claim_wait *cw, char *rv, size_t rv_cap,
                                   asb_error *err) {
    asb_json_doc d;
    char ref[256] = "";
    const char *want = o->warm_pool ? o->warm_pool : tpl;
    asb_watch_event ev;
    asb_result r = ASB_OK;
    if (asb_json_doc_parse(&d, body->ptr, body->len, &c->alloc, err) != ASB_OK)
        return ASB_ERR_JSON_INVALID;
    asb_json_get_string(&d, asb_json_find(&d, 0, o->warm_pool ? "spec.warmPoolRef.name"
                                                              : "spec.sandboxTemplateRef.name"),
                        ref, sizeof ref, NULL);
    asb_json_get_string(&d, asb_json_find(&d, 0, "metadata.uid"), cw->uid, sizeof cw->uid, NULL);
    asb_json_get_string(&d, asb_json_find(&d, 0, "metadata.resourceVersion"), rv, rv_cap, NULL);
    if (asb_json_find(&d, 0, "metadata.deletionTimestamp") >= 0)
        r = asb__fail(err, ASB_ERR_METADATA, "adopt: claim %s is being deleted", claim);
    else if (strcmp(ref, want) != 0)
        r = asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                      "adopt: claim %s is for %s \"%.100s\", not \"%.100s\"", claim,
                      o->warm_pool ? "warm pool" : "template", ref, want);
    else if (!cw->uid[0] || !rv[0])
        r = asb__fail(err, ASB_ERR_METADATA, "adopt: claim %s has no metadata.%s", claim,
                      cw->uid[0] ? "resourceVersion" : "uid");
    if (r == ASB_OK) {
        /* it may be Ready already: no event would ever say so again */
        memset(&ev, 0, sizeof ev);
        ev.type = ASB_WATCH_ADDED;
        ev.doc = &d;
        ev.object = 0;
        asb__claim_event(cw, &ev);
    }
    asb_json_doc_free(&d);
    return r;
}

/* One create in steps, so that many can share a few threads
   (asb_client_create_sandboxes): begin posts the claim and arms its
   waiter on the namespace's shared watch; the wait (j->done: nothing to
   wait for) needs no thread of its own; finish leaves the watch, reads
   what it learned, deletes the claim on failure, and makes the handle. */
typedef struct asb__create_job {
    const char *tpl;
    const asb_create_opts *opts;
    asb_create_opts zero; /* opts when the caller gave NULL */
    const char *ns;
    char claim[254], rv[64], sel[300];
    asb_kube_resource res;
    asb__claim_wait cw;
    asb__waiter *waiter;
    asb_watch_opts wo;
    int64_t t_start, deadline;
    int created, done;
    asb__span *life;      /* the handle's lifecycle span (NULL: none) */
    asb__span life_span;  /* a batch's create: its own */
    asb__span wait_span;  /* wait_for_claim_ready, begin to finish */
} asb__create_job;

static void asb__create_job_init(asb__create_job *j, const char *tpl,
                                 const asb_create_opts *opts, asb__span *life) {
    memset(j, 0, sizeof *j);
    j->tpl = tpl;
    j->opts = opts ? opts : &j->zero;
    j->created = 1;
    j->life = life;
    j->life_span.t = NULL;
    j->wait_span.t = NULL;
}

/* Everything up to the wait for Ready. On failure nothing is left: no
   claim of ours, no waiter. err is not NULL. */
static asb_result asb__create_begin(asb_client *c, asb__create_job *j, asb_error *err) {
    asb__span span; /* create_claim */
    asb_buf body, resp;
    asb_result r;
    int v1beta1_opts;
    const asb__connector *prestart_conn;
    if (!c || ((!j->tpl || !*j->tpl) == !j->opts->warm_pool))
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "create: give a template name or opts.warm_pool, not both");
    j->ns = j->opts->namespace_name ? j->opts->namespace_name : asb_client_namespace(c);
    /* every rule before any API call */
    if (asb_dns_label_validate(j->ns, strlen(j->ns), err) != ASB_OK) return ASB_ERR_INVALID_ARGUMENT;
    if (asb_labels_validate(j->opts->labels, j->opts->label_count, err) != ASB_OK)
        return ASB_ERR_INVALID_ARGUMENT;
    if (j->opts->shutdown_after_seconds < 0)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "shutdown_after_seconds must be positive (got %lld)",
                         (long long)j->opts->shutdown_after_seconds);
    r = asb__create_opts_check(j->opts, err);
    if (r != ASB_OK) return r;
    r = asb__api_version(c, err);
    if (r != ASB_OK) return r;
    /* the claim's shape must be one the cluster's version has */
    if (j->opts->warm_pool && strcmp(c->api_version, "v1alpha1") == 0)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "create: warm-pool claims need v1beta1 (agent-sandbox v0.5+); this "
                         "cluster's claims are v1alpha1: pass a template name");
    if (!j->opts->warm_pool && strcmp(c->api_version, "v1alpha1") != 0)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "create: %s claims name a warm pool, not a template: set "
                         "opts.warm_pool to a SandboxWarmPool's name",
                         c->api_version);
    v1beta1_opts = j->opts->env_count || j->opts->pod_label_count || j->opts->pod_annotation_count ||
                   j->opts->volume_claim_template_count;
    if (v1beta1_opts && strcmp(c->api_version, "v1alpha1") == 0)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "create: env, pod_labels, pod_annotations and volume_claim_templates "
                         "need v1beta1 claims (agent-sandbox v0.5+); this cluster's claims "
                         "are v1alpha1, whose controller would drop them silently");
    if (j->opts->claim_name && strcmp(c->api_version, "v1alpha1") == 0 &&
        asb_dns_label_validate(j->opts->claim_name, strlen(j->opts->claim_name), NULL) != ASB_OK)
        /* v1alpha1 names the Sandbox, its pod and Service after the claim,
           and the router takes it as a DNS label (X-Sandbox-ID) */
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "create: on a v1alpha1 cluster the claim name is also the sandbox's "
                         "and must be a DNS-1123 label (no '.', at most 63 characters): "
                         "\"%.100s\"",
                         j->opts->claim_name);
    if (j->opts->claim_name) {
        snprintf(j->claim, sizeof j->claim, "%s", j->opts->claim_name);
    } else {
        char gen[ASB_CLAIM_NAME_SIZE];
        r = asb_claim_name_generate(gen, err);
        if (r != ASB_OK) return r;
        snprintf(j->claim, sizeof j->claim, "%s", gen);
    }
    memset(&j->cw, 0, sizeof j->cw);
    j->cw.outcome = ASB_ERR_TIMEOUT;
    j->t_start = asb__now_ms();
    asb_buf_init(&body, &c->alloc);
    asb_buf_init(&resp, &c->alloc);
    asb__span_start(c->tracer, &span, "create_claim", ASB_LATENCY_CREATE_CLAIM,
                    asb__span_ctx(j->life));
    asb__span_str(&span, "sandbox.claim.name", j->claim);
    r = asb__claim_manifest(c, j->claim, j->tpl, j->opts, j->ns, &body, &span, err);
    /* the client's one watch of the namespace learns of the claim; the
       name is known now, so nothing it says can come before we listen */
    if (r == ASB_OK)
        r = asb__informer_join(c->kube, asb__claims(c, &j->res), j->ns, j->claim, NULL, asb__claim_event,
                               &j->cw, &j->waiter, err);
    if (r == ASB_OK) {
        asb_error cerr;
        memset(&cerr, 0, sizeof cerr);
        r = asb_kube_create(c->kube, asb__claims(c, &j->res), j->ns, body.ptr, body.len, &resp, &cerr);
        if (r != ASB_OK && asb__create_may_have_landed(r, &cerr) && j->opts->claim_name) {
            /* a name the caller chose may be a claim that was there
               before (its 409 lost): never deleted blind */
            size_t l = strlen(cerr.message);
            snprintf(cerr.message + l, sizeof cerr.message - l,
                     " (claim %.100s may exist now; it was left as it is)", j->claim);
        } else if (r != ASB_OK && asb__create_may_have_landed(r, &cerr)) {
            /* the POST went out but its answer was lost: the apiserver
               may have stored the claim. The name is ours (made above),
               so delete it by name; a 404 means it never landed */
            asb_error derr;
            asb_result dr = asb_kube_delete(c->kube, &j->res, j->ns, j->claim, &derr);
            if (dr != ASB_OK && dr != ASB_ERR_NOT_FOUND) {
                size_t l = strlen(cerr.message);
                snprintf(cerr.message + l, sizeof cerr.message - l,
                         " (the claim %s may exist: deleting it failed: %.150s)", j->claim,
                         derr.message);
            }
            asb__log(&c->log, ASB_LOG_ERROR, "sandbox.create",
                     "claim %s/%s: the create's answer was lost (%s); %s", j->ns, j->claim,
                     asb_result_str(r),
                     dr == ASB_OK ? "it had landed and is deleted"
                                  : dr == ASB_ERR_NOT_FOUND ? "it never landed"
                                                            : "deleting it failed");
        }
        if (r != ASB_OK && err) *err = cerr;
    }
    asb__span_end(&span, r, err);
    asb_buf_free(&body);
    if (r == ASB_ERR_KUBE_API && err->http_status == 409 && j->opts->claim_name) {
        /* the name is taken: never ours to delete */
        if (!j->opts->adopt_existing) {
            char m[ASB_ERROR_MESSAGE_SIZE];
            memcpy(m, err->message, sizeof m);
            snprintf(err->message, sizeof err->message,
                     "%.400s (set adopt_existing to attach to claim %.60s)", m, j->claim);
            asb_buf_free(&resp);
            asb__informer_leave(j->waiter);
            return r;
        }
        j->created = 0;
        asb_buf_free(&resp);
        r = asb_kube_get(c->kube, &j->res, j->ns, j->claim, &resp, err);
        if (r == ASB_ERR_NOT_FOUND)
            r = asb__fail(err, ASB_ERR_NOT_FOUND,
                          "adopt: claim %s disappeared after the create conflict; try again",
                          j->claim);
        if (r == ASB_OK) r = asb__adopt_check(c, j->claim, j->tpl, j->opts, &resp, &j->cw, j->rv, sizeof j->rv, err);
        if (r == ASB_OK) j->done = j->cw.outcome != ASB_ERR_TIMEOUT;
    } else if (r == ASB_OK) {
        asb_json_doc d;
        if (asb_json_doc_parse(&d, resp.ptr, resp.len, &c->alloc, NULL) == ASB_OK) {
            asb_json_get_string(&d, asb_json_find(&d, 0, "metadata.resourceVersion"), j->rv, sizeof j->rv,
                                NULL);
            asb_json_get_string(&d, asb_json_find(&d, 0, "metadata.uid"), j->cw.uid, sizeof j->cw.uid,
                                NULL);
            asb_json_doc_free(&d);
        }
    }
    asb_buf_free(&resp);
    if (r != ASB_OK) {
        asb__informer_leave(j->waiter);
        return r;
    }
    /* from here the informer's thread may call asb__claim_event on cw,
       under its lock: cw is read again only after the waiter left */
    asb__informer_arm(j->waiter, j->cw.uid, j->rv);
    /* Ready within ready_timeout_ms of the claim's creation (the tunnel's
       start below counts): a claim that turns Ready later is a timeout
       even when its news is already there when the wait begins */
    memset(&j->wo, 0, sizeof j->wo);
    j->wo.deadline_ms = j->opts->ready_timeout_ms > 0 ? j->opts->ready_timeout_ms : 180000;
    j->wo.cancel = j->opts->cancel;
    j->deadline = asb__now_ms() + j->wo.deadline_ms;
    /* the connector the handle will most likely use: the sandboxd one
       when the client asked for sandboxd (the router's kubectl would be
       of no use), else the mode's (AUTO decides only once it is Ready) */
    prestart_conn = c->runtime == ASB_RUNTIME_SANDBOXD ? c->sd_conn : c->conn;
    if (prestart_conn && prestart_conn->prestart) {
        /* e.g. kubectl starts while the controller works */
        asb_result tr = prestart_conn->prestart(c, err);
        if (tr != ASB_OK) {
            asb__informer_leave(j->waiter);
            if (j->created) asb_kube_delete_uid(c->kube, &j->res, j->ns, j->claim, j->cw.uid, NULL); /* no orphan */
            asb__log(&c->log, ASB_LOG_ERROR, "sandbox.create", "claim %s %s: %s", j->claim,
                     j->created ? "deleted" : "left as it was",
                     err ? err->message : asb_result_str(tr));
            return tr;
        }
    }
    asb__span_start(c->tracer, &j->wait_span, "wait_for_claim_ready", ASB_LATENCY_WAIT_READY,
                    asb__span_ctx(j->life));
    asb__span_str(&j->wait_span, "sandbox.claim.name", j->claim);
    return ASB_OK;
}

/* After the wait (r: its outcome, gap: the object was found missing by a
   list): the waiter leaves the shared watch, then the claim is judged. */
static asb_result asb__create_finish(asb_client *c, asb__create_job *j, asb_result r, int gap,
                                     asb_sandbox **out, asb_error *err) {
    asb_sandbox *sb;
    asb__span prev; /* an adopted handle's lifecycle, ended */
    prev.t = NULL;
    asb__informer_leave(j->waiter);
    j->waiter = NULL;
    if (r == ASB_ERR_KUBE_API && err->http_status == 403 && !j->done) {
        /* the user may watch and get this claim but not list or watch
           the namespace (RBAC): one watch of its own, from the create's
           (or the adopted claim's) version */
        asb__log(&c->log, ASB_LOG_WARN, "sandbox.create",
                 "claim %s/%s: the namespace's watch is refused (%s); watching the claim alone",
                 j->ns, j->claim, err->message);
        snprintf(j->sel, sizeof j->sel, "metadata.name=%s", j->claim);
        j->wo.field_selector = j->sel;
        j->wo.resource_version = j->rv[0] ? j->rv : NULL;
        r = asb_kube_watch(c->kube, &j->res, j->ns, &j->wo, asb__claim_event, &j->cw, err);
    }
    if (r == ASB_OK) r = j->cw.outcome;
    if (r == ASB_ERR_METADATA && gap)
        snprintf(j->cw.message, sizeof j->cw.message,
                 "the claim was deleted while the watch was away (a fresh list of the "
                 "namespace no longer has it)");
    asb__span_end(&j->wait_span, r, err);
    if (r != ASB_OK) {
        /* no orphan, ever: the claim we made goes before the error returns
           (only while it is still ours: the UID is the precondition) */
        asb_error derr;
        if (r == ASB_ERR_TEMPLATE_NOT_FOUND || r == ASB_ERR_WARMPOOL_NOT_FOUND ||
            r == ASB_ERR_CLAIM_FAILED || r == ASB_ERR_METADATA || r == ASB_ERR_NOT_FOUND)
            asb__fail(err, r, "sandbox claim %s: %s%s%s", j->claim, j->cw.reason,
                      j->cw.message[0] && j->cw.reason[0] ? ": " : "", j->cw.message);
        else if (r == ASB_ERR_TIMEOUT)
            asb__fail(err, r, "sandbox claim %s not ready within %d ms%s%s", j->claim,
                      j->wo.deadline_ms, j->cw.reason[0] ? "; last reason: " : "", j->cw.reason);
        else if (r == ASB_ERR_CANCELLED)
            asb__fail(err, r, "sandbox claim %s: cancelled while waiting for Ready%s", j->claim,
                      j->created ? "; the claim is deleted" : "");
        if (j->created &&
            asb_kube_delete_uid(c->kube, &j->res, j->ns, j->claim, j->cw.uid, &derr) != ASB_OK &&
            derr.code != ASB_ERR_NOT_FOUND && derr.http_status != 409 && err) {
            size_t l = strlen(err->message);
            snprintf(err->message + l, sizeof err->message - l,
                     " (and deleting the claim failed: %.150s)", derr.message);
        }
        asb__log(&c->log, ASB_LOG_ERROR, "sandbox.create", "%s",
                 err ? err->message : asb_result_str(r));
        return r;
    }
    sb = asb__new_handle(c, j->claim, j->cw.sandbox, j->ns);
    if (!sb) {
        if (j->created) asb_kube_delete_uid(c->kube, &j->res, j->ns, j->claim, j->cw.uid, NULL);
        return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "create: out of memory");
    }
    snprintf(sb->uid, sizeof sb->uid, "%s", j->cw.uid);
    sb->named = j->opts->claim_name != NULL;
    r = j->opts->probe_runtime || sb->conn->routed
            ? sb->rt->probe(sb, j->t_start + j->wo.deadline_ms, j->opts->cancel,
                            !j->opts->probe_runtime, err)
            : ASB_OK;
    if (r != ASB_OK) {
        if (j->created) asb_kube_delete_uid(c->kube, &j->res, j->ns, j->claim, j->cw.uid, NULL); /* no orphan */
        asb__handle_free(sb);
        asb__log(&c->log, ASB_LOG_ERROR, "sandbox.create", "claim %s %s: %s", j->claim,
                 j->created ? "deleted" : "left as it was", err ? err->message : asb_result_str(r));
        return r;
    }
    asb__log(&c->log, ASB_LOG_INFO, "sandbox.create",
             "claim %s/%s (%s %s)%s: sandbox %s ready in %lld ms", j->ns, j->claim,
             j->opts->warm_pool ? "warm pool" : "template", j->opts->warm_pool ? j->opts->warm_pool : j->tpl,
             j->created ? "" : " adopted", sb->name, (long long)(asb__now_ms() - j->t_start));
    pthread_mutex_lock(&c->lock);
    {
        /* adopting a claim this client already tracks: one handle per
           claim. The same claim keeps its handle; a handle on an older
           claim of that name is stale (that claim is gone) */
        asb_sandbox *old = asb__find_handle(c, j->ns, j->claim);
        if (old && strcmp(old->uid, sb->uid) == 0 && strcmp(old->name, sb->name) == 0) {
            asb__handle_free(sb);
            sb = old;
            sb->closed = 0;
        } else {
            if (old) old->active = 0;
            sb->next = c->handles;
            c->handles = sb;
        }
        if (j->life && j->life->t) {
            /* the handle's lifecycle is this create's; an adopted handle's
               earlier one ends, outside the lock (a callback may call us) */
            prev = sb->life;
            sb->life = *j->life;
            j->life->t = NULL;
        }
    }
    pthread_mutex_unlock(&c->lock);
    asb__span_end(&prev, ASB_OK, NULL);
    *out = sb;
    return ASB_OK;
}

static asb_result asb__client_create_sandbox(asb_client *c, const char *tpl,
                                             const asb_create_opts *opts, asb_sandbox **out,
                                             asb__span *life, asb_error *err) {
    asb__create_job *j;
    asb_error local;
    asb_result r;
    int gap = 0;
    if (!err) err = &local; /* a 409 must be seen even when the caller passes no err */
    if (!out) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "create: NULL out");
    *out = NULL;
    if (!c) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "create: NULL client");
    /* on the heap: the job is a few KiB, and a create runs in 32 KiB of
       stack (tests/test_static.c) */
    j = (asb__create_job *)c->alloc.alloc_fn(sizeof *j, c->alloc.user_data);
    if (!j) return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "create: out of memory");
    asb__create_job_init(j, tpl, opts, life);
    r = asb__create_begin(c, j, err);
    if (r == ASB_OK) {
        r = j->done ? ASB_OK
                    : asb__informer_wait(j->waiter, j->deadline, j->opts->cancel, &gap, err);
        r = asb__create_finish(c, j, r, gap, out, err);
    }
    c->alloc.free_fn(j, c->alloc.user_data);
    return r;
}

/* The lifecycle span starts with the create; a handle takes it over. */
ASB_API asb_result asb_client_create_sandbox(asb_client *c, const char *tpl,
                                             const asb_create_opts *opts, asb_sandbox **out,
                                             asb_error *err) {
#if ASB_TRACING
    asb__span life;
    asb_result r;
    if (!c || !c->tracer) return asb__client_create_sandbox(c, tpl, opts, out, NULL, err);
    asb__span_start(c->tracer, &life, "lifecycle", ASB_LATENCY_KIND_COUNT, NULL);
    r = asb__client_create_sandbox(c, tpl, opts, out, &life, err);
    asb__latency(c->tracer, ASB_LATENCY_CREATE_READY, r != ASB_OK, life.t0_ns);
    asb__span_end(&life, r, err); /* a failed create's: a handle took it otherwise */
    return r;
#else
    return asb__client_create_sandbox(c, tpl, opts, out, NULL, err);
#endif
}

/* A batch's create ends: its lifecycle span as asb_client_create_sandbox
   ends it (a handle took it over on success). */
static void asb__create_job_end(asb_client *c, asb__create_job *j, asb_result r,
                                const asb_error *err) {
#if ASB_TRACING
    if (j->life) {
        asb__latency(c->tracer, ASB_LATENCY_CREATE_READY, r != ASB_OK, j->life_span.t0_ns);
        asb__span_end(&j->life_span, r, err);
    }
#else
    (void)c, (void)j, (void)r, (void)err;
#endif
}

/* -- many creates at once -------------------------------------------------------- */

/* A batch: up to max_in_flight claims posted and not yet judged, served
   by a few threads. A thread finishes a create whose wait is over (or
   whose deadline passed, or that was cancelled), else posts the next
   claim while fewer than max_in_flight are out, else sleeps until the
   shared watch says a wait ended. Waiting needs no thread. */
#define ASB__BATCH_THREADS 32

typedef struct asb__batch {
    asb_client *client;
    const char *tpl;
    const asb_create_opts *opts;
    asb_create_result *results;
    asb__create_job **jobs;  /* per index, while posted and not finished */
    size_t *waiting;         /* indexes of posted creates */
    size_t count, next, nwaiting, in_flight, max_in_flight;
    pthread_mutex_t lock;    /* next, waiting, in_flight */
    asb__notify notify;      /* a wait ended */
} asb__batch;

/* A posted create ready to finish: its wait is over, its deadline passed
   or the batch's token fired. Lock held; removes it from `waiting`. */
static int asb__batch_take(asb__batch *b, size_t *out) {
    size_t k;
    int64_t now = asb__now_ms();
    int cancelled = b->opts->cancel && asb_cancel_is_triggered(b->opts->cancel);
    for (k = 0; k < b->nwaiting; k++) {
        asb__create_job *j = b->jobs[b->waiting[k]];
        if (j->done || cancelled || now >= j->deadline || asb__informer_done(j->waiter)) {
            *out = b->waiting[k];
            b->waiting[k] = b->waiting[--b->nwaiting];
            return 1;
        }
    }
    return 0;
}

static void *asb__batch_worker(void *arg) {
    asb__batch *b = (asb__batch *)arg;
    asb_client *c = b->client;
    for (;;) {
        size_t i;
        unsigned gen;
        pthread_mutex_lock(&b->notify.mu);
        gen = b->notify.gen; /* a wait ending after this wakes us below */
        pthread_mutex_unlock(&b->notify.mu);
        pthread_mutex_lock(&b->lock);
        if (asb__batch_take(b, &i)) {
            asb__create_job *j = b->jobs[i];
            asb_create_result *res = &b->results[i];
            asb_result r;
            int gap = 0;
            pthread_mutex_unlock(&b->lock);
            /* returns at once: the wait is over (or its deadline, or
               the token: then the same messages as a single create) */
            r = j->done ? ASB_OK
                        : asb__informer_wait(j->waiter, j->deadline, j->opts->cancel, &gap,
                                             &res->error);
            res->error.code = asb__create_finish(c, j, r, gap, &res->sandbox, &res->error);
            asb__create_job_end(c, j, res->error.code, &res->error);
            c->alloc.free_fn(j, c->alloc.user_data);
            pthread_mutex_lock(&b->lock);
            b->jobs[i] = NULL;
            b->in_flight--;
            pthread_mutex_unlock(&b->lock);
            continue;
        }
        if (b->next < b->count && b->in_flight < b->max_in_flight) {
            asb__create_job *j;
            asb_create_result *res;
            i = b->next++;
            b->in_flight++;
            pthread_mutex_unlock(&b->lock);
            res = &b->results[i];
            j = (asb__create_job *)c->alloc.alloc_fn(sizeof *j, c->alloc.user_data);
            if (!j) {
                res->error.code = asb__fail(&res->error, ASB_ERR_OUT_OF_MEMORY,
                                            "create: out of memory");
            } else if (b->opts->cancel && asb_cancel_is_triggered(b->opts->cancel)) {
                res->error.code = asb__fail(&res->error, ASB_ERR_CANCELLED,
                                            "create %zu of %zu: cancelled before it started",
                                            i + 1, b->count);
            } else {
                asb__create_job_init(j, b->tpl, b->opts, NULL);
#if ASB_TRACING
                if (c->tracer) { /* each create has its lifecycle, as one alone */
                    asb__span_start(c->tracer, &j->life_span, "lifecycle",
                                    ASB_LATENCY_KIND_COUNT, NULL);
                    j->life = &j->life_span;
                }
#endif
                res->error.code = asb__create_begin(c, j, &res->error);
                if (res->error.code == ASB_OK) {
                    if (!j->done) asb__informer_notify(j->waiter, &b->notify);
                    pthread_mutex_lock(&b->lock);
                    b->jobs[i] = j;
                    b->waiting[b->nwaiting++] = i;
                    pthread_mutex_unlock(&b->lock);
                    continue;
                }
                asb__create_job_end(c, j, res->error.code, &res->error);
            }
            if (j) c->alloc.free_fn(j, c->alloc.user_data);
            pthread_mutex_lock(&b->lock);
            b->in_flight--;
            pthread_mutex_unlock(&b->lock);
            continue;
        }
        if (b->next >= b->count && b->in_flight == 0) {
            pthread_mutex_unlock(&b->lock);
            pthread_mutex_lock(&b->notify.mu); /* wake the others: nothing is left */
            b->notify.gen++;
            pthread_cond_broadcast(&b->notify.cv);
            pthread_mutex_unlock(&b->notify.mu);
            return NULL;
        }
        pthread_mutex_unlock(&b->lock);
        /* until a wait ends; every 100 ms anyway, for deadlines and the
           batch's cancel token */
        pthread_mutex_lock(&b->notify.mu);
        if (b->notify.gen == gen) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 100000000L;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&b->notify.cv, &b->notify.mu, &ts);
        }
        pthread_mutex_unlock(&b->notify.mu);
    }
}

ASB_API asb_result asb_client_create_sandboxes(asb_client *c, const char *tpl,
                                               const asb_create_opts *opts, size_t count,
                                               int max_in_flight, asb_create_result *results,
                                               asb_error *err) {
    asb_create_opts zero;
    asb__batch b;
    pthread_t threads[ASB__BATCH_THREADS];
    size_t i, started = 0, nthreads, failed = 0, first = 0;
    if (!c || !results || count == 0)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "create_sandboxes: NULL client or results, or count 0");
    if (!opts) {
        memset(&zero, 0, sizeof zero);
        opts = &zero;
    }
    if (opts->claim_name)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "create_sandboxes: claim_name must be NULL (every claim needs a name "
                         "of its own)");
    memset(&b, 0, sizeof b);
    b.max_in_flight = max_in_flight > 0 ? (size_t)max_in_flight : 16;
    if (b.max_in_flight > 1024) b.max_in_flight = 1024;
    if (b.max_in_flight > count) b.max_in_flight = count;
    nthreads = b.max_in_flight < ASB__BATCH_THREADS ? b.max_in_flight : ASB__BATCH_THREADS;
    b.jobs = (asb__create_job **)c->alloc.alloc_fn(count * sizeof *b.jobs, c->alloc.user_data);
    b.waiting = (size_t *)c->alloc.alloc_fn(count * sizeof *b.waiting, c->alloc.user_data);
    if (!b.jobs || !b.waiting) {
        if (b.jobs) c->alloc.free_fn(b.jobs, c->alloc.user_data);
        if (b.waiting) c->alloc.free_fn(b.waiting, c->alloc.user_data);
        return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "create_sandboxes: out of memory");
    }
    for (i = 0; i < count; i++) {
        b.jobs[i] = NULL;
        results[i].sandbox = NULL;
        memset(&results[i].error, 0, sizeof results[i].error);
    }
    /* the threads post, get and delete through kept connections instead
       of a new TLS handshake each time */
    asb__kube_pool_grow(c->kube, (int)nthreads);
    asb__http_pool_grow(c->http, (int)nthreads);
    b.client = c;
    b.tpl = tpl;
    b.opts = opts;
    b.results = results;
    b.count = count;
    pthread_mutex_init(&b.lock, NULL);
    pthread_mutex_init(&b.notify.mu, NULL);
    pthread_cond_init(&b.notify.cv, NULL);
    if (nthreads > 1) {
        pthread_attr_t at;
        sigset_t all, old;
        pthread_attr_init(&at);
        pthread_attr_setstacksize(&at, 512 * 1024);
        sigfillset(&all); /* signals stay with the program's own threads */
        pthread_sigmask(SIG_SETMASK, &all, &old);
        for (started = 0; started < nthreads - 1; started++)
            if (pthread_create(&threads[started], &at, asb__batch_worker, &b) != 0)
                break; /* fewer threads: the ones running share the work */
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&at);
    }
    asb__batch_worker(&b); /* the calling thread is one of them */
    for (i = 0; i < started; i++) pthread_join(threads[i], NULL);
    pthread_cond_destroy(&b.notify.cv);
    pthread_mutex_destroy(&b.notify.mu);
    pthread_mutex_destroy(&b.lock);
    c->alloc.free_fn(b.jobs, c->alloc.user_data);
    c->alloc.free_fn(b.waiting, c->alloc.user_data);
    for (i = 0; i < count; i++)
        if (results[i].error.code != ASB_OK && failed++ == 0) first = i;
    if (!failed) return ASB_OK;
    return asb__fail(err, results[first].error.code,
                     "%zu of %zu creates failed; the first (#%zu): %.400s", failed, count,
                     first + 1, results[first].error.message);
}

ASB_API const char *asb_sandbox_claim_name(const asb_sandbox *sb) { return sb ? sb->claim : NULL; }
ASB_API const char *asb_sandbox_name(const asb_sandbox *sb) { return sb ? sb->name : NULL; }
ASB_API const char *asb_sandbox_namespace(const asb_sandbox *sb) { return sb ? sb->ns : NULL; }
ASB_API int asb_sandbox_is_active(const asb_sandbox *sb) { return sb && sb->active && !sb->closed; }

ASB_API void asb_sandbox_close_connection(asb_sandbox *sb) {
    if (!sb) return;
    sb->closed = 1;
    asb__sb_life_end(sb, ASB_OK);
    if (sb->conn->release) sb->conn->release(sb); /* e.g. its pod tunnel */
}

ASB_API asb_result asb_sandbox_terminate(asb_sandbox *sb, asb_error *err) {
    asb__span span;
    asb_kube_resource res;
    asb_result r;
    if (!sb) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "terminate: NULL handle");
    if (!sb->active) return ASB_OK;
    if (sb->in_pod) { /* no claim: only the handle ends */
        sb->active = 0;
        return ASB_OK;
    }
    asb__sb_span_begin(sb, &span, "delete_claim", ASB_LATENCY_DELETE);
    asb__span_str(&span, "sandbox.claim.name", sb->claim);
    r = asb_kube_delete_uid(sb->client->kube, asb__claims(sb->client, &res), sb->ns, sb->claim,
                            sb->uid, err);
    if (r == ASB_ERR_NOT_FOUND) r = ASB_OK; /* already gone is fine */
    asb__sb_span_finish(sb, &span, r, err);
    if (r == ASB_ERR_KUBE_API && err && err->http_status == 409 && sb->uid[0]) {
        /* the UID precondition failed: the claim of that name now is
           another one, ours is gone; that one is not ours to delete */
        asb__log(&sb->client->log, ASB_LOG_INFO, "sandbox.delete",
                 "claim %s/%s was already replaced by another of the same name: left alone",
                 sb->ns, sb->claim);
        r = ASB_OK;
    }
    if (r == ASB_OK) sb->active = 0;       /* only on success: retry later */
    if (r == ASB_OK) asb__sb_life_end(sb, ASB_OK);
    if (r == ASB_OK && sb->conn->release) sb->conn->release(sb); /* e.g. its pod tunnel */
    if (r == ASB_OK)
        asb__log(&sb->client->log, ASB_LOG_INFO, "sandbox.delete", "claim %s/%s deleted", sb->ns,
                 sb->claim);
    else
        asb__log(&sb->client->log, ASB_LOG_ERROR, "sandbox.delete", "claim %s/%s: %s", sb->ns,
                 sb->claim, err ? err->message : asb_result_str(r));
    return r;
}

/* The handle's pod IP: the cached one, or looked up now (and cached). */
static asb_result asb__sb_cached_ip(asb_sandbox *sb, asb_error *err) {
    asb_result r;
    if (sb->ip[0]) return ASB_OK;
    r = asb_sandbox_pod_ip(sb, sb->ip, err);
    if (r != ASB_OK) {
        sb->ip[0] = '\0';
        return r;
    }
    asb__log(&sb->client->log, ASB_LOG_DEBUG, "sandbox.pod_ip", "sandbox %s/%s: pod IP %s",
             sb->ns, sb->name, sb->ip);
    return ASB_OK;
}

/* Whether pod IP lookups were refused (401/403) for this client; the
   first refusal turns them off for good, and says so once in the log. */
static int asb__pod_ip_refused(asb_client *c, const asb_error *lookup_err, const char *then) {
    int refused, now = 0;
    pthread_mutex_lock(&c->lock);
    if (lookup_err && !c->pod_ip_refused &&
        (lookup_err->http_status == 401 || lookup_err->http_status == 403))
        c->pod_ip_refused = now = 1;
    refused = c->pod_ip_refused;
    pthread_mutex_unlock(&c->lock);
    if (now)
        asb__log(&c->log, ASB_LOG_WARN, "sandbox.pod_ip", "pod IP lookup refused (%d): %s",
                 lookup_err->http_status, then);
    return refused;
}

/* req->url = base + path, in url (reused). */
static void asb__sb_url(asb_buf *url, const char *base, const char *path, asb_http_request *req) {
    url->len = 0;
    asb_buf_append(url, base, strlen(base));
    asb_buf_append(url, path, strlen(path));
    req->url = url->ptr;
}

/* A peer that echoes request headers into its error body would hand our
   token, or a key in an extra header, to whoever reads the error: mask
   them (an extra value under 8 bytes is no key, and masking it would
   garble ordinary text). */
static void asb__client_mask_error(const asb_client *c, asb_error *err) {
    size_t i;
    if (!err) return;
    if (c->router_auth) asb__mask_error(err, c->router_auth + 7);
    for (i = 0; i < c->extra_count; i++)
        if (strlen(c->extra[i].value) >= 8) asb__mask_error(err, c->extra[i].value);
}

/* Appends advice to err->message, cutting the end of the message (not the
   advice) when both do not fit. */
static void asb__error_hint(asb_error *err, const char *hint) {
    size_t l = strlen(err->message), n = strlen(hint) + 1;
    if (l > sizeof err->message - n) l = sizeof err->message - n;
    memcpy(err->message + l, hint, n);
}

/* One HTTP exchange of a sandbox call, inside what is left of the call's
   deadline (timeout_ms from t0; 0: none): the tunnel coming up and an
   earlier try have spent part of it. The one rule: the answer is awaited
   until the deadline, never less, so the per-read timeout (which would
   cut a command silent for 30 s) is raised to it. */
static asb_result asb__sb_do(asb_client *c, asb_http_request *req, int64_t t0, int timeout_ms,
                             asb_http_response *resp, asb_error *err) {
    if (timeout_ms > 0) {
        int64_t left = (int64_t)timeout_ms - (asb__now_ms() - t0);
        if (left <= 0) {
            memset(resp, 0, sizeof *resp);
            return asb__fail(err, ASB_ERR_TIMEOUT, "the deadline passed before the request");
        }
        req->timeout_ms = (int)left;
        req->read_timeout_ms = (int)left;
    }
    return asb_http_do(c->http, req, resp, err);
}

/* One HTTP call to the runtime's port in the sandbox, to the endpoint
   the handle's connector gives, with the router's headers when it is
   routed. */
static asb_result asb__sb_call_port(asb_sandbox *sb, int server_port, asb_http_request *req,
                                    const char *path, int timeout_ms, asb_http_response *resp,
                                    asb_error *err) {
    asb_client *c;
    asb__endpoint ep;
    char port[16], rid[40], tsec[24], podip[ASB_IP_SIZE];
    char tp[ASB_TRACEPARENT_SIZE];
    asb_http_header h[24];
    size_t nh = 0, i;
    asb_buf url;
    asb_result r;
    unsigned char rnd[8];
    asb_error lerr;
    int64_t t0 = asb__now_ms();
    int again = 0;
    asb_retry_policy once;
    const asb_retry_policy *policy = req->retry;
    memset(resp, 0, sizeof *resp);
    if (!sb || !sb->active || sb->closed)
        return asb__fail(err, ASB_ERR_CLOSED, "sandbox: the handle was terminated or closed");
    if (req->cancel && asb_cancel_is_triggered(req->cancel))
        return asb__fail(err, ASB_ERR_CANCELLED, "sandbox: cancelled before the call started");
    c = sb->client;
    if (!err && c->log.fn) err = &lerr; /* the log wants the message */
    /* names from the API go into headers and URLs: check them first */
    if (asb_dns_label_validate(sb->name, strlen(sb->name), err) != ASB_OK ||
        asb_dns_label_validate(sb->ns, strlen(sb->ns), err) != ASB_OK)
        return ASB_ERR_INVALID_ARGUMENT;
    snprintf(port, sizeof port, "%d", server_port);
    r = sb->conn->endpoint(c, sb, server_port, &ep, err);
    if (r != ASB_OK) {
        asb__log(&c->log, ASB_LOG_ERROR, "sandbox.call", "%s (sandbox %s/%s)",
                 err ? err->message : asb_result_str(r), sb->ns, sb->name);
        return r;
    }
    /* one id for every retry of this call, so logs tie them together */
    asb__id_bytes(rnd, sizeof rnd);
    for (i = 0; i < 8; i++) snprintf(rid + 2 * i, 3, "%02x", rnd[i]);
    if (ep.routed) {
        h[nh].name = "X-Sandbox-ID";
        h[nh++].value = sb->name;
        h[nh].name = "X-Sandbox-Namespace";
        h[nh++].value = sb->ns;
        h[nh].name = "X-Sandbox-Port";
        h[nh++].value = port;
        if (c->send_pod_ip && !asb__pod_ip_refused(c, NULL, NULL)) {
            asb_error perr;
            memset(&perr, 0, sizeof perr);
            if (asb__sb_cached_ip(sb, &perr) == ASB_OK) {
                snprintf(podip, sizeof podip, "%s", sb->ip);
                h[nh].name = "X-Sandbox-Pod-IP";
                h[nh++].value = podip;
            } else {
                /* not allowed to read it: stop asking */
                asb__pod_ip_refused(c, &perr, "X-Sandbox-Pod-IP is off from now on");
            }
        }
        if (c->router_auth) {
            h[nh].name = "Authorization";
            h[nh++].value = c->router_auth;
        }
        for (i = 0; i < c->extra_count; i++) h[nh++] = c->extra[i]; /* <= 12 */
    }
    h[nh].name = "X-Request-ID";
    h[nh++].value = rid;
    nh += asb__trace_headers(sb->trace_cur, h + nh, tp); /* traceparent, tracestate */
    if (timeout_ms > 0) {
        /* whole seconds, rounded up, without the overflow of
           (ms + 999) / 1000 near INT_MAX */
        snprintf(tsec, sizeof tsec, "%d", timeout_ms / 1000 + (timeout_ms % 1000 != 0));
        if (ep.routed) {
            h[nh].name = "X-Sandbox-Timeout";
            h[nh++].value = tsec;
        }
    }
    for (i = 0; i < req->header_count && nh < 24; i++) h[nh++] = req->headers[i];
    req->headers = h;
    req->header_count = nh;
    asb_buf_init(&url, &c->alloc);
    asb__sb_url(&url, ep.base, path, req);
    if (ep.maybe_stale && !req->retry) {
        /* a refused connect to a cached address means "look again", not
           "back off and retry the same address" */
        memset(&once, 0, sizeof once);
        once.max_attempts = 1;
        req->retry = &once;
    }
    r = asb__sb_do(c, req, t0, timeout_ms, resp, err);
    if (req->retry == &once && r != ASB_OK && r != ASB_ERR_CONNECT &&
        asb__method_idempotent(req->method ? req->method : "GET") && !req->body_read &&
        !req->on_body && /* a stream may have handed bytes on already */
        (r == ASB_ERR_RECV || r == ASB_ERR_SEND ||
         (r == ASB_ERR_HTTP_STATUS && resp->status >= 500 && resp->status <= 504))) {
        /* it connected: the address is good; the usual policy for the rest */
        req->retry = policy;
        asb_http_response_free(resp);
        r = asb__sb_do(c, req, t0, timeout_ms, resp, err);
    }
    req->retry = policy;
    if (sb->ip[0] && (r == ASB_ERR_CONNECT || (r == ASB_ERR_HTTP_STATUS && resp->status == 502)))
        sb->ip[0] = '\0'; /* the pod may have moved: look its IP up again next time */
    if (r == ASB_ERR_CONNECT && sb->conn->reconnect) {
        /* never reached anything: what the connector started may have
           died, or the pod moved; the connector rebuilds it, once */
        asb_result cr = sb->conn->reconnect(c, sb, server_port, req->body_read == NULL, &ep,
                                            &again, err);
        if (cr != ASB_OK || again) asb_http_response_free(resp);
        if (cr != ASB_OK) {
            r = cr;
        } else if (again) {
            asb__sb_url(&url, ep.base, path, req);
            r = asb__sb_do(c, req, t0, timeout_ms, resp, err);
        }
    }
    asb_buf_free(&url);
    if (r == ASB_ERR_TLS_VERIFY && err) {
        /* the usual cause is a router with a private CA: name the knob,
           cutting mbedTLS's detail if the message is full */
        asb__error_hint(err, " (asb_client_desc.sandbox_tls sets the router's CA and server_name)");
    }
    if (r != ASB_OK && err && sb->conn->explain) sb->conn->explain(c, r, err);
    if (r == ASB_ERR_DNS && err && sb->conn->dns_hint) {
        /* e.g. in-cluster without a pod IP, and the Service name does not
           resolve: say why the name was used and when it exists */
        asb__error_hint(err, sb->conn->dns_hint);
    }
    if (r != ASB_OK) asb__client_mask_error(c, err);
    if (err) {
        int exec = strcmp(path, "/execute") == 0;
        const char *what = exec ? "run" : path;
        int64_t took = asb__now_ms() - t0;
        if (r == ASB_ERR_TIMEOUT && timeout_ms > 0 && took >= timeout_ms)
            asb__fail(err, r, "%s: no answer within the %d ms deadline%s", what, timeout_ms,
                      exec ? "; the command may still be running in the sandbox" : "");
        else if (r == ASB_ERR_CANCELLED && req->cancel && asb_cancel_is_triggered(req->cancel))
            asb__fail(err, r, "%s: cancelled after %lld ms%s", what, (long long)took,
                      exec ? "; the command may still be running in the sandbox" : "");
        else if (r == ASB_ERR_HTTP_STATUS && resp->status == 502 && exec && took >= 25000 &&
                 ep.routed)
            /* the Go sandbox-router's ResponseHeaderTimeout: its 502 looks
               like a dial failure; the time it took tells them apart */
            asb__error_hint(err, " (after a long wait: the router gave up waiting for the "
                                 "runtime's response head; the Go sandbox-router waits "
                                 "--response-header-timeout, 30 s by default. Raise that "
                                 "flag, or run a runtime that answers at once: "
                                 "agentsandbox-runtime, or sandboxd, which streams)");
    }
    if (r != ASB_OK && err && !err->request_id[0])
        snprintf(err->request_id, sizeof err->request_id, "%s", rid); /* ours, for the router's log */
    if (r == ASB_ERR_HTTP_STATUS && resp->status == 404) r = ASB_ERR_NOT_FOUND;
    if (r == ASB_OK)
        asb__log(&c->log, ASB_LOG_DEBUG, "sandbox.call",
                 "%s %s: %d in %lld ms (sandbox %s/%s, request %s, %d attempt%s)",
                 req->method ? req->method : "GET",
                 path, resp->status, (long long)(asb__now_ms() - t0), sb->ns, sb->name, rid,
                 resp->attempts, resp->attempts == 1 ? "" : "s");
    else
        asb__log(&c->log, ASB_LOG_ERROR, "sandbox.call", "%s (sandbox %s/%s, request %s)",
                 err ? err->message : asb_result_str(r), sb->ns, sb->name, rid);
    return r;
}

/* One call to the legacy runtime's port (server_port). */
static asb_result asb__sb_call(asb_sandbox *sb, asb_http_request *req, const char *path,
                               int timeout_ms, asb_http_response *resp, asb_error *err) {
    return asb__sb_call_port(sb, sb ? sb->client->server_port : 0, req, path, timeout_ms, resp,
                             err);
}

/* What a log may say about a command: its executable's base name, nothing
   else. Leading VAR=value assignments are skipped, so the secrets people
   pass that way never reach a log; "" for an empty command. */
static void asb__command_executable(const char *cmd, char *out, size_t cap) {
    const char *p = cmd, *start, *base;
    size_t n;
    for (;;) {
        const char *t, *eq = NULL;
        char quote = 0;
        while (*p == ' ' || *p == '\t' || *p == '\n') p++;
        /* one word, quotes and backslashes honoured as the runtime's split does */
        for (t = p; *t && (quote || (*t != ' ' && *t != '\t' && *t != '\n')); t++) {
            if (quote) {
                if (*t == quote) quote = 0;
                else if (*t == '\\' && quote == '"' && t[1]) t++;
            } else if (*t == '\'' || *t == '"') {
                quote = *t;
            } else if (*t == '\\' && t[1]) {
                t++;
            } else if (*t == '=' && !eq) {
                eq = t;
            }
        }
        if (eq && eq > p) {
            const char *k = p;
            int name = (*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') || *k == '_';
            for (k++; name && k < eq; k++)
                name = (*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') ||
                       (*k >= '0' && *k <= '9') || *k == '_';
            if (name) { /* NAME=value: not the executable */
                p = t;
                continue;
            }
        }
        start = p;
        n = (size_t)(t - p);
        break;
    }
    /* drop quotes around the word; then the part after the last '/' */
    if (n >= 2 && (start[0] == '\'' || start[0] == '"') && start[n - 1] == start[0]) {
        start++;
        n -= 2;
    }
    for (base = start + n; base > start && base[-1] != '/'; base--) {}
    n -= (size_t)(base - start);
    {
        /* a word that still holds '=' ("API_KEY=x" quoted, API-KEY=x):
           never its value */
        const char *eq = (const char *)memchr(base, '=', n);
        if (eq) n = (size_t)(eq - base);
    }
    if (cap == 0) return;
    if (n >= cap) n = cap - 1;
    memcpy(out, base, n);
    out[n] = '\0';
}

ASB_API void asb_run_result_free(asb_run_result *r) {
    if (!r) return;
    asb_buf_free(&r->out);
    asb_buf_free(&r->err);
}

ASB_API asb_result asb_sandbox_run(asb_sandbox *sb, const char *command, int timeout_ms,
                                   asb_run_result *result, asb_error *err) {
    asb_call_opts o;
    memset(&o, 0, sizeof o);
    o.timeout_ms = timeout_ms;
    return asb_sandbox_run_opts(sb, command, &o, result, err);
}

/* The default deadline of a command (the reference's run(timeout=60)). */
#define ASB__RUN_DEFAULT_TIMEOUT_MS 60000

ASB_API asb_result asb_sandbox_run_opts(asb_sandbox *sb, const char *command,
                                        const asb_call_opts *opts, asb_run_result *result,
                                        asb_error *err) {
    int timeout_ms = opts && opts->timeout_ms > 0 ? opts->timeout_ms : ASB__RUN_DEFAULT_TIMEOUT_MS;
    asb_result r;
    asb__span span;
    if (!result) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "run: NULL result");
    memset(result, 0, sizeof *result);
    if (!sb || !command) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "run: NULL argument");
    asb_buf_init(&result->out, &sb->client->alloc);
    asb_buf_init(&result->err, &sb->client->alloc);
    asb__sb_span_begin(sb, &span, "run", ASB_LATENCY_RUN); /* tracing off: one test */
    asb__span_command(&span, command); /* the program's name, nothing else */
    if (opts && (opts->env_count || opts->cwd) && !sb->rt->has_run_env)
        r = asb__unsupported(sb, "run with env or cwd", err);
    else
        r = sb->rt->run(sb, command, timeout_ms, opts, result, err);
    if (r == ASB_OK) asb__span_int(&span, "sandbox.exit_code", result->exit_code, ASB_ATTR_INT);
    asb__sb_span_finish(sb, &span, r, err);
    if (sb->client->log.fn) {
        char raw[64], exe[100];
        asb__command_executable(command, raw, sizeof raw);
        asb__quote(exe, sizeof exe, raw, strlen(raw), 63); /* no control bytes */
        if (r == ASB_OK)
            asb__log(&sb->client->log, ASB_LOG_DEBUG, "sandbox.run",
                     "%s: exit code %d, %zu bytes out, %zu bytes err (sandbox %s/%s)", exe,
                     result->exit_code, result->out.len, result->err.len, sb->ns, sb->name);
        else
            asb__log(&sb->client->log, ASB_LOG_ERROR, "sandbox.run", "%s: %s (sandbox %s/%s)",
                     exe, asb_result_str(r), sb->ns, sb->name);
    }
    return r;
}

/* A memory buffer as an asb_read_fn, so write() is write_stream(). */
typedef struct asb__mem_src {
    const char *p;
    size_t left;
} asb__mem_src;

static long asb__mem_read(void *ud, char *buf, size_t cap) {
    asb__mem_src *m = (asb__mem_src *)ud;
    size_t n = m->left < cap ? m->left : cap;
    if (n) memcpy(buf, m->p, n);
    m->p += n;
    m->left -= n;
    return (long)n;
}

ASB_API asb_result asb_sandbox_write(asb_sandbox *sb, const char *path, const void *data,
                                     size_t len, asb_error *err) {
    return asb_sandbox_write_opts(sb, path, data, len, NULL, err);
}

ASB_API asb_result asb_sandbox_write_opts(asb_sandbox *sb, const char *path, const void *data,
                                          size_t len, const asb_call_opts *opts,
                                          asb_error *err) {
    asb__mem_src m;
    if (!sb || (!data && len)) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "write: NULL argument");
    m.p = (const char *)data;
    m.left = len;
    return asb_sandbox_write_stream_opts(sb, path, asb__mem_read, &m, (uint64_t)len, opts, err);
}

ASB_API asb_result asb_sandbox_read(asb_sandbox *sb, const char *path, asb_buf *out,
                                    asb_error *err) {
    return asb_sandbox_read_opts(sb, path, out, NULL, err);
}

ASB_API asb_result asb_sandbox_read_opts(asb_sandbox *sb, const char *path, asb_buf *out,
                                         const asb_call_opts *opts, asb_error *err) {
    asb__span span;
    asb_result r;
    size_t before;
    if (!sb || !out) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "read: NULL argument");
    before = out->len;
    asb__sb_span_begin(sb, &span, "read", ASB_LATENCY_READ);
    asb__span_str(&span, "sandbox.file.path", path);
    r = sb->rt->read(sb, path, out, NULL, NULL, opts, err);
    if (r == ASB_OK)
        asb__span_int(&span, "sandbox.file.size", (int64_t)(out->len - before), ASB_ATTR_INT);
    asb__sb_span_finish(sb, &span, r, err);
    return r;
}

ASB_API asb_result asb_sandbox_exists(asb_sandbox *sb, const char *path, int *exists,
                                      asb_error *err) {
    return asb_sandbox_exists_opts(sb, path, exists, NULL, err);
}

ASB_API asb_result asb_sandbox_exists_opts(asb_sandbox *sb, const char *path, int *exists,
                                           const asb_call_opts *opts, asb_error *err) {
    asb__span span;
    asb_result r;
    if (!sb || !exists) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "exists: NULL argument");
    *exists = 0;
    asb__sb_span_begin(sb, &span, "exists", ASB_LATENCY_EXISTS);
    asb__span_str(&span, "sandbox.file.path", path);
    r = sb->rt->exists(sb, path, exists, opts, err);
    if (r == ASB_OK) asb__span_int(&span, "sandbox.file.exists", *exists != 0, ASB_ATTR_BOOL);
    asb__sb_span_finish(sb, &span, r, err);
    return r;
}

/* -- attach, list, delete ------------------------------------------------------ */

static asb_sandbox *asb__find_handle(asb_client *c, const char *ns, const char *claim) {
    asb_sandbox *s;
    for (s = c->handles; s; s = s->next)
        if (s->active && strcmp(s->ns, ns) == 0 && strcmp(s->claim, claim) == 0) return s;
    return NULL;
}

static asb_result asb__client_get_sandbox(asb_client *c, const char *claim, const char *ns,
                                          int resolve_timeout_ms, asb_sandbox **out,
                                          asb_error *err);
/* An attached handle starts its lifecycle span (unless it has one). */
ASB_API asb_result asb_client_get_sandbox(asb_client *c, const char *claim, const char *ns,
                                          int resolve_timeout_ms, asb_sandbox **out,
                                          asb_error *err) {
    asb_result r = asb__client_get_sandbox(c, claim, ns, resolve_timeout_ms, out, err);
#if ASB_TRACING
    if (r == ASB_OK && c->tracer && !(*out)->life.t)
        asb__span_start(c->tracer, &(*out)->life, "lifecycle", ASB_LATENCY_KIND_COUNT, NULL);
#endif
    return r;
}

static asb_result asb__client_get_sandbox(asb_client *c, const char *claim, const char *ns,
                                          int resolve_timeout_ms, asb_sandbox **out,
                                          asb_error *err) {
    asb_kube_resource res, sbres;
    asb_buf body;
    asb_result r;
    asb_sandbox *sb;
    asb__claim_wait cw;
    char sel[300], rv[64] = "";
    if (!out) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "get: NULL out");
    *out = NULL;
    if (!c || !claim) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "get: NULL argument");
    if (!ns) ns = asb_client_namespace(c);
    if (asb_dns_label_validate(ns, strlen(ns), err) != ASB_OK) return ASB_ERR_INVALID_ARGUMENT;
    r = asb__api_version(c, err);
    if (r != ASB_OK) return r;
    memset(&cw, 0, sizeof cw);
    asb_buf_init(&body, &c->alloc);
    r = asb_kube_get(c->kube, asb__claims(c, &res), ns, claim, &body, err);
    pthread_mutex_lock(&c->lock);
    sb = asb__find_handle(c, ns, claim);
    if (sb && r == ASB_ERR_NOT_FOUND) sb->active = 0; /* stale: the claim is gone */
    pthread_mutex_unlock(&c->lock);
    if (r != ASB_OK) {
        asb_buf_free(&body);
        return r;
    }
    /* a tracked handle is checked as a new one would be (the reference
       re-resolves too): the claim bound, its Sandbox there, and the same
       claim (UID) as the handle's */
    {
        asb_json_doc d;
        asb_watch_event ev;
        if (asb_json_doc_parse(&d, body.ptr, body.len, &c->alloc, NULL) == ASB_OK) {
            memset(&ev, 0, sizeof ev);
            ev.type = ASB_WATCH_MODIFIED;
            ev.doc = &d;
            ev.object = 0;
            asb__claim_event(&cw, &ev);
            asb_json_get_string(&d, asb_json_find(&d, 0, "metadata.resourceVersion"), rv,
                                sizeof rv, NULL);
            asb_json_get_string(&d, asb_json_find(&d, 0, "metadata.uid"), cw.uid,
                                sizeof cw.uid, NULL);
            asb_json_doc_free(&d);
        }
    }
    asb_buf_free(&body);
    if (!cw.sandbox[0]) {
        /* not bound yet: wait for it, as create does */
        asb_watch_opts wo;
        memset(&wo, 0, sizeof wo);
        snprintf(sel, sizeof sel, "metadata.name=%s", claim);
        wo.field_selector = sel;
        wo.resource_version = rv[0] ? rv : NULL;
        wo.deadline_ms = resolve_timeout_ms > 0 ? resolve_timeout_ms : 30000;
        cw.outcome = ASB_ERR_TIMEOUT;
        r = asb_kube_watch(c->kube, &res, ns, &wo, asb__claim_event, &cw, err);
        if (r == ASB_OK && !cw.sandbox[0]) r = cw.outcome == ASB_OK ? ASB_ERR_TIMEOUT : cw.outcome;
        if (r == ASB_ERR_METADATA)
            r = asb__fail(err, r, "claim %s was deleted while resolving it", claim);
        else if (r == ASB_ERR_NOT_FOUND)
            r = asb__fail(err, r, "claim %s: %s", claim, cw.message);
        if (r != ASB_OK && !cw.sandbox[0]) {
            if (sb) asb_sandbox_close_connection(sb); /* tracked still: cleanup reaches it */
            return r;
        }
    }
    /* the Sandbox itself must exist */
    sbres.group = "agents.x-k8s.io";
    sbres.version = c->api_version;
    sbres.plural = "sandboxes";
    r = asb_kube_get(c->kube, &sbres, ns, cw.sandbox, NULL, err);
    if (r != ASB_OK) {
        /* the lookup failing says nothing sure about the claim: the handle
           is closed, and stays tracked so cleanup still reaches it */
        if (sb) asb_sandbox_close_connection(sb);
        return r;
    }
    pthread_mutex_lock(&c->lock);
    sb = asb__find_handle(c, ns, claim);
    if (sb && (!sb->uid[0] || strcmp(sb->uid, cw.uid) == 0) && strcmp(sb->name, cw.sandbox) == 0) {
        sb->closed = 0; /* attaching again reopens a closed handle */
        if (!sb->uid[0]) snprintf(sb->uid, sizeof sb->uid, "%s", cw.uid);
        pthread_mutex_unlock(&c->lock);
        *out = sb;
        return ASB_OK;
    }
    if (sb) sb->active = 0; /* its claim is gone: another has the name now */
    pthread_mutex_unlock(&c->lock);
    sb = asb__new_handle(c, claim, cw.sandbox, ns);
    if (!sb) return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "get: out of memory");
    snprintf(sb->uid, sizeof sb->uid, "%s", cw.uid);
    pthread_mutex_lock(&c->lock);
    {
        /* another thread may have attached meanwhile: keep one handle */
        asb_sandbox *other = asb__find_handle(c, ns, claim);
        if (other && strcmp(other->uid, sb->uid) == 0) {
            asb__handle_free(sb);
            sb = other;
        } else {
            if (other) other->active = 0;
            sb->next = c->handles;
            c->handles = sb;
        }
    }
    pthread_mutex_unlock(&c->lock);
    *out = sb;
    return ASB_OK;
}

ASB_API size_t asb_client_list_active(asb_client *c, asb_sandbox **out, size_t cap) {
    asb_sandbox *s;
    size_t n = 0;
    if (!c) return 0;
    pthread_mutex_lock(&c->lock);
    for (s = c->handles; s; s = s->next) {
        if (!s->active || s->closed) continue;
        if (out && n < cap) out[n] = s;
        n++;
    }
    pthread_mutex_unlock(&c->lock);
    return n;
}

ASB_API void asb_name_list_free(asb_name_list *l) {
    size_t i;
    if (!l || !l->names) return;
    for (i = 0; i < l->count; i++) l->alloc_.free_fn(l->names[i], l->alloc_.user_data);
    l->alloc_.free_fn(l->names, l->alloc_.user_data);
    l->names = NULL;
    l->count = 0;
}

ASB_API const char *asb_client_namespace(const asb_client *c) {
    const asb_kube_config *kc = c ? asb_kube_client_config(c->kube) : NULL;
    return kc && kc->default_namespace && *kc->default_namespace ? kc->default_namespace
                                                                 : "default";
}

ASB_API asb_kube_client *asb_client_kube(asb_client *c) { return c ? c->kube : NULL; }

ASB_API asb_result asb_client_claim_resource(asb_client *c, asb_kube_resource *out,
                                             asb_error *err) {
    asb_result r;
    if (!c || !out) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "claim_resource: NULL argument");
    memset(out, 0, sizeof *out);
    r = asb__api_version(c, err);
    if (r == ASB_OK) asb__claims(c, out);
    return r;
}

ASB_API void asb_claim_list_free(asb_claim_list *l) {
    if (!l) return;
    if (l->items) l->alloc_.free_fn(l->items, l->alloc_.user_data);
    if (l->strings_) l->alloc_.free_fn(l->strings_, l->alloc_.user_data);
    l->items = NULL;
    l->strings_ = NULL;
    l->count = 0;
}

/* A string of the claim at tok into the list's string bytes; the item
   keeps its offset until the bytes stop moving (asb_client_list_claims
   turns offsets into pointers at the end). */
static size_t asb__claim_str(const asb_json_doc *d, int from, const char *path, asb_buf *bytes,
                             asb_result *r) {
    size_t at = bytes->len;
    if (*r != ASB_OK) return 0;
    if (asb_json_find(d, from, path) >= 0 &&
        asb_json_append_string(d, asb_json_find(d, from, path), bytes) != ASB_OK)
        bytes->len = at; /* not a string: "" */
    if (asb_buf_append(bytes, "", 1) != ASB_OK) *r = ASB_ERR_OUT_OF_MEMORY;
    return at;
}

ASB_API asb_result asb_client_list_claims(asb_client *c, const asb_claim_list_opts *opts,
                                          asb_claim_list *out, asb_error *err) {
    asb_claim_list_opts o;
    asb_kube_list_opts lo;
    asb_kube_resource res;
    asb_buf bytes;
    char cont[2048] = "";
    size_t cap = 0, i;
    asb_result r;
    if (!out) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "list: NULL out");
    memset(out, 0, sizeof *out);
    if (!c) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "list: NULL client");
    out->alloc_ = c->alloc;
    memset(&o, 0, sizeof o);
    if (opts) o = *opts;
    if (!o.namespace_name) o.namespace_name = asb_client_namespace(c);
    r = asb__api_version(c, err);
    if (r != ASB_OK) return r;
    memset(&lo, 0, sizeof lo);
    lo.label_selector = o.label_selector;
    lo.limit = 500;
    asb_buf_init(&bytes, &c->alloc);
    do {
        asb_buf page;
        asb_json_doc d;
        asb_json_iter it;
        int item;
        asb_buf_init(&page, &c->alloc);
        lo.continue_token = cont;
        /* ns NULL: the cluster-wide path (the kube layer's rule) */
        r = asb_kube_list(c->kube, asb__claims(c, &res), o.all_namespaces ? NULL : o.namespace_name,
                          &lo, &page, err);
        if (r == ASB_OK && asb_json_doc_parse(&d, page.ptr, page.len, &c->alloc, err) == ASB_OK) {
            it = asb_json_iter_begin(&d, asb_json_find(&d, 0, "items"));
            while (r == ASB_OK && asb_json_iter_next(&d, &it, NULL, &item)) {
                asb_claim_info *ci;
                asb_json_iter ct;
                int cond;
                char ts[64] = "";
                if (out->count == cap) {
                    size_t ncap = cap ? cap * 2 : 16;
                    asb_claim_info *ni = (asb_claim_info *)c->alloc.realloc_fn(
                        out->items, ncap * sizeof *ni, c->alloc.user_data);
                    if (!ni) {
                        r = ASB_ERR_OUT_OF_MEMORY;
                        break;
                    }
                    out->items = ni;
                    cap = ncap;
                }
                ci = &out->items[out->count];
                memset(ci, 0, sizeof *ci);
                /* offsets now, pointers at the end (the bytes may move) */
                ci->name = (const char *)(uintptr_t)asb__claim_str(&d, item, "metadata.name", &bytes, &r);
                ci->namespace_name =
                    (const char *)(uintptr_t)asb__claim_str(&d, item, "metadata.namespace", &bytes, &r);
                ci->template_name = (const char *)(uintptr_t)asb__claim_str(
                    &d, item, "spec.sandboxTemplateRef.name", &bytes, &r);
                ci->warm_pool =
                    (const char *)(uintptr_t)asb__claim_str(&d, item, "spec.warmPoolRef.name", &bytes, &r);
                /* v0.4 writes status.sandbox.Name, v0.5 .name */
                ci->sandbox_name = (const char *)(uintptr_t)asb__claim_str(
                    &d, item,
                    asb_json_find(&d, item, "status.sandbox.name") >= 0 ? "status.sandbox.name"
                                                                         : "status.sandbox.Name",
                    &bytes, &r);
                ci->reason = ci->message = (const char *)(uintptr_t)asb__claim_str(&d, -1, "", &bytes, &r);
                ct = asb_json_iter_begin(&d, asb_json_find(&d, item, "status.conditions"));
                while (asb_json_iter_next(&d, &ct, NULL, &cond)) {
                    if (!asb_json_string_eq(&d, asb_json_find(&d, cond, "type"), "Ready", 5))
                        continue;
                    ci->ready = asb_json_string_eq(&d, asb_json_find(&d, cond, "status"), "True", 4);
                    ci->reason = (const char *)(uintptr_t)asb__claim_str(&d, cond, "reason", &bytes, &r);
                    ci->message =
                        (const char *)(uintptr_t)asb__claim_str(&d, cond, "message", &bytes, &r);
                }
                if (asb_json_get_string(&d, asb_json_find(&d, item, "metadata.creationTimestamp"),
                                        ts, sizeof ts, NULL) == ASB_OK)
                    asb_time_parse_rfc3339(ts, strlen(ts), &ci->created_unix, NULL);
                if (r == ASB_OK) out->count++;
            }
            cont[0] = '\0';
            asb_json_get_string(&d, asb_json_find(&d, 0, "metadata.continue"), cont, sizeof cont,
                                NULL);
            asb_json_doc_free(&d);
        } else if (r == ASB_OK) {
            r = ASB_ERR_JSON_INVALID;
        }
        asb_buf_free(&page);
    } while (r == ASB_OK && cont[0]);
    if (r == ASB_ERR_OUT_OF_MEMORY) asb__fail(err, r, "list: out of memory");
    if (r != ASB_OK) {
        asb_buf_free(&bytes);
        asb_claim_list_free(out);
        return r;
    }
    out->strings_ = bytes.ptr; /* kept: the items point into it */
    for (i = 0; i < out->count; i++) {
        asb_claim_info *ci = &out->items[i];
        const char **f[7];
        size_t k;
        f[0] = &ci->name, f[1] = &ci->namespace_name, f[2] = &ci->template_name;
        f[3] = &ci->warm_pool, f[4] = &ci->sandbox_name, f[5] = &ci->reason, f[6] = &ci->message;
        for (k = 0; k < 7; k++) *f[k] = bytes.ptr + (size_t)(uintptr_t)*f[k];
    }
    return ASB_OK;
}

ASB_API asb_result asb_client_list_all(asb_client *c, const char *ns, const char *selector,
                                       asb_name_list *out, asb_error *err) {
    asb_kube_list_opts lo;
    asb_kube_resource res;
    char cont[2048] = "";
    size_t cap = 0;
    asb_result r = ASB_OK;
    if (!out) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "list: NULL out");
    memset(out, 0, sizeof *out);
    if (!c) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "list: NULL client");
    out->alloc_ = c->alloc;
    r = asb__api_version(c, err);
    if (r != ASB_OK) return r;
    memset(&lo, 0, sizeof lo);
    lo.label_selector = selector;
    lo.limit = 500;
    do {
        asb_buf page;
        asb_json_doc d;
        asb_json_iter it;
        int item;
        asb_buf_init(&page, &c->alloc);
        lo.continue_token = cont;
        r = asb_kube_list(c->kube, asb__claims(c, &res), ns ? ns : asb_client_namespace(c), &lo,
                          &page, err);
        if (r == ASB_OK && asb_json_doc_parse(&d, page.ptr, page.len, &c->alloc, err) == ASB_OK) {
            it = asb_json_iter_begin(&d, asb_json_find(&d, 0, "items"));
            while (r == ASB_OK && asb_json_iter_next(&d, &it, NULL, &item)) {
                asb_buf name;
                if (out->count == cap) {
                    size_t ncap = cap ? cap * 2 : 16;
                    char **nn = (char **)c->alloc.realloc_fn(out->names, ncap * sizeof(char *),
                                                             c->alloc.user_data);
                    if (!nn) {
                        r = asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "list: out of memory");
                        break;
                    }
                    out->names = nn;
                    cap = ncap;
                }
                asb_buf_init(&name, &c->alloc);
                if (asb_json_append_string(&d, asb_json_find(&d, item, "metadata.name"), &name) ==
                    ASB_OK)
                    out->names[out->count++] = name.ptr;
                else
                    asb_buf_free(&name);
            }
            cont[0] = '\0';
            asb_json_get_string(&d, asb_json_find(&d, 0, "metadata.continue"), cont, sizeof cont,
                                NULL);
            asb_json_doc_free(&d);
        } else if (r == ASB_OK) {
            r = ASB_ERR_JSON_INVALID;
        }
        asb_buf_free(&page);
    } while (r == ASB_OK && cont[0]);
    if (r != ASB_OK) asb_name_list_free(out);
    return r;
}

ASB_API asb_result asb_client_delete_sandbox(asb_client *c, const char *claim, const char *ns,
                                             asb_error *err) {
    asb__span span;
    asb_kube_resource res;
    asb_sandbox *s;
    asb_result r;
    if (!c || !claim) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "delete: NULL argument");
    if (!ns) ns = asb_client_namespace(c);
    r = asb__api_version(c, err);
    if (c->tracer) { /* a child of the handle's lifecycle, if there is one */
        pthread_mutex_lock(&c->lock);
        s = asb__find_handle(c, ns, claim);
        asb__span_start(c->tracer, &span, "delete_claim", ASB_LATENCY_DELETE,
                        s ? asb__span_ctx(&s->life) : NULL);
        pthread_mutex_unlock(&c->lock);
    } else {
        span.t = NULL;
    }
    asb__span_str(&span, "sandbox.claim.name", claim);
    if (r == ASB_OK) r = asb_kube_delete(c->kube, asb__claims(c, &res), ns, claim, err);
    asb__span_end(&span, r, err);
    if (r == ASB_OK || r == ASB_ERR_NOT_FOUND) {
        /* gone either way: a handle for it ends */
        pthread_mutex_lock(&c->lock);
        s = asb__find_handle(c, ns, claim);
        if (s) s->active = 0;
        pthread_mutex_unlock(&c->lock);
        if (s) asb__sb_life_end(s, ASB_OK); /* handles live until the client's free */
        asb__log(&c->log, ASB_LOG_INFO, "sandbox.delete", "claim %s/%s %s", ns, claim,
                 r == ASB_OK ? "deleted" : "not found (gone already)");
    } else {
        asb__log(&c->log, ASB_LOG_ERROR, "sandbox.delete", "claim %s/%s: %s", ns, claim,
                 err ? err->message : asb_result_str(r));
    }
    return r;
}

ASB_API asb_result asb_client_delete_all(asb_client *c, asb_error *err) {
    asb_sandbox *list[256];
    size_t n, i, failed = 0;
    asb_result first = ASB_OK;
    asb_error one;
    char first_msg[300] = "";
    if (!c) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "delete_all: NULL client");
    do {
        /* every claim the client still tracks, the handles closed with
           close_connection too: closing ended the connection, not the
           claim (the reference deletes every tracked claim) */
        asb_sandbox *s;
        n = 0;
        pthread_mutex_lock(&c->lock);
        for (s = c->handles; s && n < 256; s = s->next)
            if (s->active) list[n++] = s;
        pthread_mutex_unlock(&c->lock);
        for (i = 0; i < n; i++) {
            if (asb_sandbox_terminate(list[i], &one) != ASB_OK) {
                if (!failed) {
                    first = one.code;
                    snprintf(first_msg, sizeof first_msg, "%.299s", one.message);
                }
                failed++;
                list[i]->active = 0; /* tried: do not loop on it */
            }
        }
    } while (n == 256);
    if (failed)
        return asb__fail(err, first, "delete_all: %zu claim(s) could not be deleted; first: %s",
                         failed, first_msg);
    return ASB_OK;
}

/* -- streaming files and listing --------------------------------------------------- */

ASB_API asb_result asb_sandbox_write_stream(asb_sandbox *sb, const char *path, asb_read_fn read,
                                            void *user_data, uint64_t size, asb_error *err) {
    return asb_sandbox_write_stream_opts(sb, path, read, user_data, size, NULL, err);
}

ASB_API asb_result asb_sandbox_write_stream_opts(asb_sandbox *sb, const char *path,
                                                 asb_read_fn read, void *user_data,
                                                 uint64_t size, const asb_call_opts *opts,
                                                 asb_error *err) {
    asb__span span;
    asb_result r;
    if (!sb || !read) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "write: NULL argument");
    if (opts && opts->file_mode && !sb->rt->has_run_env)
        return asb__unsupported(sb, "write with a file_mode", err);
    /* write and write_from_fd end here: one "write" span for each */
    asb__sb_span_begin(sb, &span, "write", ASB_LATENCY_WRITE);
    asb__span_str(&span, "sandbox.file.path", path);
    asb__span_int(&span, "sandbox.file.size", (int64_t)size, ASB_ATTR_INT);
    r = sb->rt->write(sb, path, read, user_data, size, opts, err);
    asb__sb_span_finish(sb, &span, r, err);
    return r;
}

#if ASB_TRACING
/* A stream's bytes, counted on their way to the caller's sink (the read
   span's sandbox.file.size). */
typedef struct asb__count_sink {
    asb_write_fn write;
    void *user;
    uint64_t n;
} asb__count_sink;

static asb_result asb__count_write(void *ud, const char *data, size_t len) {
    asb__count_sink *c = (asb__count_sink *)ud;
    c->n += len;
    return c->write(c->user, data, len);
}
#endif

ASB_API asb_result asb_sandbox_read_stream(asb_sandbox *sb, const char *path, asb_write_fn write,
                                           void *user_data, asb_error *err) {
    return asb_sandbox_read_stream_opts(sb, path, write, user_data, NULL, err);
}

ASB_API asb_result asb_sandbox_read_stream_opts(asb_sandbox *sb, const char *path,
                                                asb_write_fn write, void *user_data,
                                                const asb_call_opts *opts, asb_error *err) {
#if ASB_TRACING
    asb__span span;
    asb_result r;
    asb__count_sink cs;
#endif
    if (!sb || !write) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "read: NULL argument");
#if ASB_TRACING
    if (sb->client->tracer) { /* read_to_fd ends here too: one "read" span */
        cs.write = write;
        cs.user = user_data;
        cs.n = 0;
        asb__sb_span_begin(sb, &span, "read", ASB_LATENCY_READ);
        asb__span_str(&span, "sandbox.file.path", path);
        r = sb->rt->read(sb, path, NULL, asb__count_write, &cs, opts, err);
        asb__span_int(&span, "sandbox.file.size", (int64_t)cs.n, ASB_ATTR_INT);
        asb__sb_span_finish(sb, &span, r, err);
        return r;
    }
#endif
    return sb->rt->read(sb, path, NULL, write, user_data, opts, err);
}

/* A descriptor as an asb_read_fn: read(2), EINTR retried. */
static long asb__fd_read(void *ud, char *buf, size_t cap) {
    int fd = *(const int *)ud;
    ssize_t n;
    do {
        n = read(fd, buf, cap);
    } while (n < 0 && errno == EINTR);
    return n < 0 ? -1 : (long)n;
}

ASB_API asb_result asb_sandbox_write_from_fd(asb_sandbox *sb, const char *path, int fd,
                                             asb_error *err) {
    return asb_sandbox_write_from_fd_opts(sb, path, fd, NULL, err);
}

ASB_API asb_result asb_sandbox_write_from_fd_opts(asb_sandbox *sb, const char *path, int fd,
                                                  const asb_call_opts *opts, asb_error *err) {
    struct stat st;
    off_t at;
    if (!sb || fd < 0) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "write: no handle or fd");
    if (fstat(fd, &st) != 0) return asb__fail(err, ASB_ERR_IO, "write: fstat: %s", strerror(errno));
    if (!S_ISREG(st.st_mode))
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "write: fd %d is not a regular file: its size is unknown (use "
                         "asb_sandbox_write_stream with the size)",
                         fd);
    at = lseek(fd, 0, SEEK_CUR);
    if (at < 0) at = 0; /* not seekable after all: from the start */
    if (at > st.st_size) at = st.st_size;
    return asb_sandbox_write_stream_opts(sb, path, asb__fd_read, &fd,
                                         (uint64_t)(st.st_size - at), opts, err);
}

/* A descriptor as an asb_write_fn: every byte, short writes and EINTR
   retried. */
static asb_result asb__fd_write(void *ud, const char *data, size_t len) {
    int fd = *(const int *)ud;
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return ASB_ERR_IO;
        data += n;
        len -= (size_t)n;
    }
    return ASB_OK;
}

ASB_API asb_result asb_sandbox_read_to_fd(asb_sandbox *sb, const char *path, int fd,
                                          asb_error *err) {
    return asb_sandbox_read_to_fd_opts(sb, path, fd, NULL, err);
}

ASB_API asb_result asb_sandbox_read_to_fd_opts(asb_sandbox *sb, const char *path, int fd,
                                               const asb_call_opts *opts, asb_error *err) {
    asb_result r;
    if (!sb || fd < 0) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "read: no handle or fd");
    r = asb_sandbox_read_stream_opts(sb, path, asb__fd_write, &fd, opts, err);
    if (r == ASB_ERR_IO && err && err->code == ASB_ERR_IO) {
        size_t l = strlen(err->message);
        snprintf(err->message + l, sizeof err->message - l, " (writing to fd %d)", fd);
    }
    return r;
}

ASB_API void asb_file_list_free(asb_file_list *l) {
    size_t i;
    if (!l || !l->entries) return;
    for (i = 0; i < l->count; i++) l->alloc_.free_fn(l->entries[i].name, l->alloc_.user_data);
    l->alloc_.free_fn(l->entries, l->alloc_.user_data);
    l->entries = NULL;
    l->count = 0;
}

ASB_API asb_result asb_sandbox_list(asb_sandbox *sb, const char *path, asb_file_list *out,
                                    asb_error *err) {
    return asb_sandbox_list_opts(sb, path, out, NULL, err);
}

ASB_API asb_result asb_sandbox_list_opts(asb_sandbox *sb, const char *path, asb_file_list *out,
                                         const asb_call_opts *opts, asb_error *err) {
    asb__span span;
    asb_result r;
    if (!out) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "list: NULL out");
    memset(out, 0, sizeof *out);
    if (!sb) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "list: NULL handle");
    out->alloc_ = sb->client->alloc;
    asb__sb_span_begin(sb, &span, "list", ASB_LATENCY_LIST);
    asb__span_str(&span, "sandbox.file.path", path);
    r = sb->rt->list(sb, path, out, opts, err);
    if (r == ASB_OK) asb__span_int(&span, "sandbox.file.count", (int64_t)out->count, ASB_ATTR_INT);
    asb__sb_span_finish(sb, &span, r, err);
    if (r != ASB_OK) asb_file_list_free(out);
    return r;
}


/* -- what only sandboxd can do --------------------------------------------------- */

ASB_API const char *asb_sandbox_runtime(const asb_sandbox *sb) {
    return sb && sb->rt ? sb->rt->name : NULL;
}

ASB_API asb_result asb_client_sandbox_in_pod(asb_client *c, asb_sandbox **out, asb_error *err) {
    asb_sandbox *sb;
    if (!out) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "in_pod: NULL out");
    *out = NULL;
    if (!c) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "in_pod: NULL client");
    if (c->conn != &asb__connector_in_pod)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "in_pod: the client's mode is %s, not ASB_CONNECT_IN_POD", c->conn->name);
    pthread_mutex_lock(&c->lock);
    if (!c->in_pod) {
        sb = (asb_sandbox *)c->alloc.alloc_fn(sizeof *sb, c->alloc.user_data);
        if (sb) {
            memset(sb, 0, sizeof *sb);
            sb->client = c;
            sb->conn = &asb__connector_in_pod;
            sb->rt = &asb__runtime_sandboxd;
            sb->in_pod = 1;
            sb->named = 1; /* never a claim to delete */
            pthread_mutex_init(&sb->conn_lock, NULL);
            pthread_mutex_init(&sb->h2_lock, NULL);
            snprintf(sb->name, sizeof sb->name, "in-pod");
            snprintf(sb->ns, sizeof sb->ns, "default");
            snprintf(sb->pod, sizeof sb->pod, "in-pod");
            sb->active = 1;
            sb->next = c->handles;
            c->handles = sb;
            c->in_pod = sb;
        }
    }
    sb = c->in_pod;
    if (sb) {
        sb->active = 1; /* the same handle, again usable */
        sb->closed = 0;
    }
    pthread_mutex_unlock(&c->lock);
    if (!sb) return asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "in_pod: out of memory");
    *out = sb;
    return ASB_OK;
}

ASB_API asb_result asb_sandbox_stat(asb_sandbox *sb, const char *path, asb_file_stat *out,
                                    const asb_call_opts *opts, asb_error *err) {
    if (!out) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "stat: NULL out");
    memset(out, 0, sizeof *out);
    if (!sb || !path) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "stat: NULL argument");
    if (!sb->rt->stat) return asb__unsupported(sb, "stat", err);
    return sb->rt->stat(sb, path, out, opts, err);
}

ASB_API asb_result asb_sandbox_delete_file(asb_sandbox *sb, const char *path, int recursive,
                                           const asb_call_opts *opts, asb_error *err) {
    if (!sb || !path) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "delete: NULL argument");
    if (!sb->rt->delete_file) return asb__unsupported(sb, "delete", err);
    return sb->rt->delete_file(sb, path, recursive != 0, opts, err);
}

ASB_API asb_result asb_sandbox_metadata(asb_sandbox *sb, asb_buf *out, const asb_call_opts *opts,
                                        asb_error *err) {
    if (!sb || !out) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "metadata: NULL argument");
    if (!sb->rt->metadata) return asb__unsupported(sb, "metadata", err);
    return sb->rt->metadata(sb, out, opts, err);
}

ASB_API asb_result asb_sandbox_process_start(asb_sandbox *sb, const asb_process_opts *opts,
                                             asb_process **out, asb_error *err) {
    if (!out) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "process: NULL out");
    *out = NULL;
    if (!sb || !opts) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "process: NULL argument");
    if (!sb->rt->process_start) return asb__unsupported(sb, "a streaming process", err);
    return sb->rt->process_start(sb, opts, out, err);
}

ASB_API int asb_process_id(const asb_process *p) { return p ? (int)p->pid : 0; }

ASB_API asb_result asb_process_write_stdin(asb_process *p, const void *data, size_t len,
                                           asb_error *err) {
    asb_buf req;
    asb_result r;
    if (!p || (!data && len)) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "stdin: NULL argument");
    if (len == 0) return ASB_OK; /* nothing to send (an empty write is no EOF) */
    asb_buf_init(&req, &p->sb->client->alloc);
    pthread_mutex_lock(&p->stdin_lock); /* one write at a time: in order */
    if (p->stdin_closed) {
        r = asb__fail(err, ASB_ERR_CLOSED, "stdin: process %d: stdin was closed", (int)p->pid);
    } else if (asb__pv1_write_stdin_request(&req, p->pid, data, len, 0) != ASB_OK) {
        r = asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "stdin: out of memory");
    } else {
        r = asb__proc_unary(p, ASB__SD_METHOD("WriteStdin"), &req, err);
    }
    pthread_mutex_unlock(&p->stdin_lock);
    asb_buf_free(&req);
    return r;
}

ASB_API asb_result asb_process_close_stdin(asb_process *p, asb_error *err) {
    asb_buf req;
    asb_result r = ASB_OK;
    if (!p) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "stdin: NULL process");
    asb_buf_init(&req, &p->sb->client->alloc);
    pthread_mutex_lock(&p->stdin_lock);
    if (!p->stdin_closed) {
        if (asb__pv1_write_stdin_request(&req, p->pid, NULL, 0, 1) != ASB_OK)
            r = asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "stdin: out of memory");
        else
            r = asb__proc_unary(p, ASB__SD_METHOD("WriteStdin"), &req, err);
        if (r == ASB_OK) p->stdin_closed = 1;
    }
    pthread_mutex_unlock(&p->stdin_lock);
    asb_buf_free(&req);
    return r;
}

ASB_API asb_result asb_process_signal(asb_process *p, int sig, asb_error *err) {
    asb_buf req;
    asb_result r;
    int32_t wire;
    if (!p) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "signal: NULL process");
    /* process.v1.Signal names the numbers Linux gives them */
    if (sig == SIGINT) wire = 2;
    else if (sig == SIGTERM) wire = 15;
    else if (sig == SIGKILL) wire = 9;
    else
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT,
                         "signal: %d is not SIGINT, SIGTERM or SIGKILL (all sandboxd delivers)",
                         sig);
    asb_buf_init(&req, &p->sb->client->alloc);
    r = asb__pv1_send_signal_request(&req, p->pid, wire) == ASB_OK
            ? asb__proc_unary(p, ASB__SD_METHOD("SendSignal"), &req, err)
            : asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "signal: out of memory");
    asb_buf_free(&req);
    return r;
}

ASB_API asb_result asb_process_resize(asb_process *p, unsigned rows, unsigned cols,
                                      asb_error *err) {
    asb_buf req;
    asb_result r;
    if (!p) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "resize: NULL process");
    if (!rows || !cols || rows > 65535 || cols > 65535)
        return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "resize: rows and cols must be 1-65535");
    asb_buf_init(&req, &p->sb->client->alloc);
    r = asb__pv1_resize_tty_request(&req, p->pid, cols, rows) == ASB_OK
            ? asb__proc_unary(p, ASB__SD_METHOD("ResizeTTY"), &req, err)
            : asb__fail(err, ASB_ERR_OUT_OF_MEMORY, "resize: out of memory");
    asb_buf_free(&req);
    return r;
}

ASB_API asb_result asb_process_wait(asb_process *p, int timeout_ms, int *exit_code,
                                    asb_error *err) {
    asb_result r;
    if (exit_code) *exit_code = -1;
    if (!p) return asb__fail(err, ASB_ERR_INVALID_ARGUMENT, "wait: NULL process");
    r = asb__proc_pump(p, 1, timeout_ms > 0 ? asb__now_ms() + timeout_ms : 0, err);
    if (r == ASB_OK && exit_code) *exit_code = p->exit_code;
    if (r == ASB_OK)
        asb__log(&p->sb->client->log, ASB_LOG_DEBUG, "sandbox.process",
                 "process %d exited with %d (sandbox %s/%s)", (int)p->pid, p->exit_code,
                 p->sb->ns, p->sb->name);
    return r;
}

ASB_API void asb_process_free(asb_process *p) {
    if (!p) return;
    if (!p->exited) asb_grpc_call_cancel(p->call); /* sandboxd then kills it */
    asb__proc_free(p);
}

#endif /* ASB__IMPLEMENTATION_DONE */
#endif /* AGENTSANDBOX_IMPLEMENTATION */

/*
------------------------------------------------------------------------------
LICENSE (MIT)

Copyright (c) 2026 The agentsandbox.h authors

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in
all copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
------------------------------------------------------------------------------
*/
