"""Minimal zenoh router from Python (pip has no zenohd): python router.py [tcp/127.0.0.1:7447]"""
import sys, time, signal, json, zenoh
ep = sys.argv[1] if len(sys.argv) > 1 else "tcp/127.0.0.1:7447"
conf = zenoh.Config()
conf.insert_json5("mode", '"router"')
conf.insert_json5("listen/endpoints", json.dumps([ep]))
conf.insert_json5("scouting/multicast/enabled", "false")
s = zenoh.open(conf)
print(f"router {s.info.zid()} listening on {ep}", flush=True)
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
try:
    while True: time.sleep(3600)
except (KeyboardInterrupt, SystemExit):
    s.close()
