"""A test process.v1.ProcessService on grpcio, for tests/test_h2_peers.c.

Not a process runner: command[0] picks a behaviour the C tests check.
  Start  echo A B ..   init(42), stdout per argument, exit(0)
         big N         init, one stdout message of N bytes (i % 251), exit
         many N SIZE   N stdout messages of SIZE bytes ('a' + k % 26)
         cat           init(43), then stdout for each WriteStdin(43) input,
                       exit(0) at EOF or 128+signal after SendSignal(43)
         slow          init(44), then waits until the client cancels
         fail          aborts NOT_FOUND before any message (trailers-only)
         fail-after    one stdout message, then aborts with ABORTED
         sleep MS      sleeps, then exit
         describe ...  stdout: the request as Python's protobuf read it;
                       then stderr "err", exit(-7), init(2147483647)
         metadata      init(45), stdout: the call's metadata (below), exit(0)
         reinit        init(46); at the first WriteStdin(46) a second
                       init(47) (a protocol violation), then exit(0)
         badpid N      init(N) (N < 1: no process), then exit(0)
  Execute              served as a server stream, so that it can lie:
                       a command whose last string is "two-answers": two
                       ExecuteResponses (a unary call gets one); "c1-error":
                       aborts INTERNAL with C1 controls (U+009B CSI, U+009D
                       OSC, U+009C) and an ESC in its message; else one
                       answer, as a unary server sends it:
                       exit_code = total length of the command strings,
                       stdout = the first 64 bytes of command[0];
                       "stats": stdout = "cancelled=N" (Start streams the
                       client cancelled); "describe": stdout as above,
                       stderr "e", exit_code -3; a command whose last
                       string is "metadata" (as /bin/sh -c metadata):
                       stdout = the call's metadata as the server got
                       it, "key=value\n" per entry, sorted
Prints "port N" once serving on 127.0.0.1.
Usage: grpc_server.py GEN_DIR [MAX_CONNECTION_AGE_MS]: with an age, each
connection gets GOAWAY after it, and 20 s of grace for calls in flight.
"""
import queue
import sys
import threading
import time
from concurrent import futures

sys.path.insert(0, sys.argv[1])
import grpc  # noqa: E402
import process_pb2 as pb  # noqa: E402
import process_pb2_grpc as pbg  # noqa: E402

lock = threading.Lock()
cancelled = [0]
cats = {}  # pid -> queue of bytes | None (EOF) | int (signal)


def describe(config, pty=None):
    env = ",".join("%s=%s" % (k, config.env_vars[k]) for k in sorted(config.env_vars))
    cwd = config.cwd if config.HasField("cwd") else "<unset>"
    text = "cmd=%s env=%s cwd=%s" % ("|".join(config.command), env, cwd)
    if pty is not None:
        text += " pty=%s" % pty
    return text.encode()


def metadata(ctx):
    return "".join("%s=%s\n" % kv for kv in sorted(ctx.invocation_metadata())).encode()


class Service(pbg.ProcessServiceServicer):
    def Start(self, req, ctx):
        cmd = list(req.config.command)
        what = cmd[0] if cmd else ""
        if what == "echo":
            yield pb.StartResponse(init=pb.InitEvent(process_id=42))
            for a in cmd[1:]:
                yield pb.StartResponse(stdout=a.encode())
            yield pb.StartResponse(exit=pb.ExitEvent(exit_code=0))
        elif what == "big":
            n = int(cmd[1])
            yield pb.StartResponse(init=pb.InitEvent(process_id=42))
            yield pb.StartResponse(stdout=bytes(i % 251 for i in range(n)))
            yield pb.StartResponse(exit=pb.ExitEvent(exit_code=0))
        elif what == "many":
            n, size = int(cmd[1]), int(cmd[2])
            for k in range(n):
                yield pb.StartResponse(stdout=bytes([97 + k % 26]) * size)
            yield pb.StartResponse(exit=pb.ExitEvent(exit_code=0))
        elif what == "cat":
            q = queue.Queue()
            with lock:
                cats[43] = q
            yield pb.StartResponse(init=pb.InitEvent(process_id=43))
            while True:
                item = q.get()
                if item is None:
                    yield pb.StartResponse(exit=pb.ExitEvent(exit_code=0))
                    break
                if isinstance(item, int):
                    yield pb.StartResponse(exit=pb.ExitEvent(exit_code=128 + item))
                    break
                yield pb.StartResponse(stdout=item)
            with lock:
                cats.pop(43, None)
        elif what == "slow":
            done = threading.Event()

            def gone():
                with lock:
                    cancelled[0] += 1
                done.set()

            ctx.add_callback(gone)
            yield pb.StartResponse(init=pb.InitEvent(process_id=44))
            done.wait(60)
        elif what == "fail":
            ctx.abort(grpc.StatusCode.NOT_FOUND, "no such process: pid 7 \u00fcn\u00efc\u00f8d\u00e9 \u2713 100%")
        elif what == "fail-after":
            yield pb.StartResponse(stdout=b"partial")
            ctx.abort(grpc.StatusCode.ABORTED, "stopped after one message")
        elif what == "describe":
            pty = "%dx%d" % (req.pty.cols, req.pty.rows) if req.HasField("pty") else "<unset>"
            yield pb.StartResponse(stdout=describe(req.config, pty))
            yield pb.StartResponse(stderr=b"err")
            yield pb.StartResponse(exit=pb.ExitEvent(exit_code=-7))
            yield pb.StartResponse(init=pb.InitEvent(process_id=2147483647))
        elif what == "metadata":
            yield pb.StartResponse(init=pb.InitEvent(process_id=45))
            yield pb.StartResponse(stdout=metadata(ctx))
            yield pb.StartResponse(exit=pb.ExitEvent(exit_code=0))
        elif what == "reinit":
            q = queue.Queue()
            with lock:
                cats[46] = q
            yield pb.StartResponse(init=pb.InitEvent(process_id=46))
            q.get(timeout=30)
            yield pb.StartResponse(init=pb.InitEvent(process_id=47))
            yield pb.StartResponse(exit=pb.ExitEvent(exit_code=0))
            with lock:
                cats.pop(46, None)
        elif what == "badpid":
            yield pb.StartResponse(init=pb.InitEvent(process_id=int(cmd[1])))
            yield pb.StartResponse(exit=pb.ExitEvent(exit_code=0))
        elif what == "sleep":
            time.sleep(int(cmd[1]) / 1000.0)
            yield pb.StartResponse(exit=pb.ExitEvent(exit_code=0))
        else:
            ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, "unknown test command")

    def Execute(self, req, ctx):
        cmd = list(req.config.command)
        if cmd and cmd[0] == "stats":
            with lock:
                return pb.ExecuteResponse(stdout=b"cancelled=%d" % cancelled[0])
        if cmd and cmd[0] == "describe":
            return pb.ExecuteResponse(exit_code=-3, stdout=describe(req.config), stderr=b"e")
        if cmd and cmd[-1] == "metadata":
            return pb.ExecuteResponse(exit_code=0, stdout=metadata(ctx))
        total = sum(len(c.encode()) for c in cmd)
        first = cmd[0].encode()[:64] if cmd else b""
        return pb.ExecuteResponse(exit_code=total, stdout=first)

    def WriteStdin(self, req, ctx):
        with lock:
            q = cats.get(req.process_id)
        if q is None:
            ctx.abort(grpc.StatusCode.NOT_FOUND, "process %d not found" % req.process_id)
        q.put(None if req.HasField("eof") else bytes(req.input))
        return pb.WriteStdinResponse()

    def SendSignal(self, req, ctx):
        with lock:
            q = cats.get(req.process_id)
        if q is None:
            ctx.abort(grpc.StatusCode.NOT_FOUND, "process %d not found" % req.process_id)
        q.put(int(req.signal))
        return pb.SendSignalResponse()

    def ResizeTTY(self, req, ctx):
        return pb.ResizeTTYResponse()


def execute_stream(svc):
    def handler(req, ctx):
        cmd = list(req.config.command)
        if cmd and cmd[-1] == "two-answers":
            yield pb.ExecuteResponse(exit_code=1, stdout=b"first")
            yield pb.ExecuteResponse(exit_code=2, stdout=b"second")
            return
        if cmd and cmd[-1] == "c1-error":
            ctx.abort(grpc.StatusCode.INTERNAL,
                      "boom \u009b2J \u009d0;owned\u009c \x1b[31m red \u00e9\u20ac")
        yield svc.Execute(req, ctx)
    return handler


def main():
    opts = [("grpc.max_receive_message_length", 64 << 20),
            ("grpc.max_send_message_length", 64 << 20)]
    if len(sys.argv) > 2:
        opts += [("grpc.max_connection_age_ms", int(sys.argv[2])),
                 ("grpc.max_connection_age_grace_ms", 20000)]
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=16), options=opts)
    svc = Service()
    # The generated registration, with Execute as a server stream (above).
    handlers = {
        "Start": grpc.unary_stream_rpc_method_handler(
            svc.Start, request_deserializer=pb.StartRequest.FromString,
            response_serializer=pb.StartResponse.SerializeToString),
        "Execute": grpc.unary_stream_rpc_method_handler(
            execute_stream(svc), request_deserializer=pb.ExecuteRequest.FromString,
            response_serializer=pb.ExecuteResponse.SerializeToString),
    }
    for name, req, resp in (("WriteStdin", pb.WriteStdinRequest, pb.WriteStdinResponse),
                            ("SendSignal", pb.SendSignalRequest, pb.SendSignalResponse),
                            ("ResizeTTY", pb.ResizeTTYRequest, pb.ResizeTTYResponse)):
        handlers[name] = grpc.unary_unary_rpc_method_handler(
            getattr(svc, name), request_deserializer=req.FromString,
            response_serializer=resp.SerializeToString)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler("process.v1.ProcessService", handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print("port %d" % port, flush=True)
    server.wait_for_termination()


if __name__ == "__main__":
    main()
