"""The grpcio side of make bench-grpc: the same calls as tests/bench/bench_grpc.c.
  bench_client.py GEN_DIR PORT unary N       N Execute calls, one channel
  bench_client.py GEN_DIR PORT stream N SIZE Start "many": N messages of SIZE
Prints "secs S bytes B" for the measured part (the import and the channel
set-up excluded, as on our side)."""
import sys
import time

sys.path.insert(0, sys.argv[1])
import grpc  # noqa: E402
import process_pb2 as pb  # noqa: E402
import process_pb2_grpc as pbg  # noqa: E402

port, mode = sys.argv[2], sys.argv[3]
opts = [("grpc.max_receive_message_length", 64 << 20)]
ch = grpc.insecure_channel("127.0.0.1:" + port, options=opts)
stub = pbg.ProcessServiceStub(ch)
grpc.channel_ready_future(ch).result(timeout=10)
total = 0
if mode == "unary":
    req = pb.ExecuteRequest(config=pb.ProcessConfig(command=["bench", "x"]))
    stub.Execute(req, timeout=10)  # warm: the connection is up
    t0 = time.monotonic()
    for _ in range(int(sys.argv[4])):
        r = stub.Execute(req, timeout=10)
        total += r.exit_code
else:
    req = pb.StartRequest(config=pb.ProcessConfig(command=["many", sys.argv[4], sys.argv[5]]))
    t0 = time.monotonic()
    for ev in stub.Start(req, timeout=600):
        total += len(ev.stdout)
print("secs %.6f bytes %d" % (time.monotonic() - t0, total))
