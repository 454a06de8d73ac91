"""`coolgp node --data BAG`: a recording written by rosbags streams into a real node exactly as
the same rows as CSV do, and a node killed mid-recording resumes from its checkpoint without
counting a row twice."""
import os
import signal
import subprocess
import time

from conftest import free_port, run, status, stop, survey, wait_for, write_bag

INPUT = "/fix:sensor_msgs/msg/NavSatFix:latitude,longitude"
TARGET = "/temp:sensor_msgs/msg/Temperature:temperature"


def start(coolgp_bin, tmp_path, name, data, *extra, round_ms=20):
    port = free_port()
    log = open(tmp_path / f"{name}.log", "a")
    p = subprocess.Popen(
        [coolgp_bin, "node", "--id", "1", "--fleet", f"{name}{os.getpid()}", "--inducing", "12",
         "--data", data, "--batch", "20", "--round-ms", str(round_ms),
         "--listen", f"tcp/127.0.0.1:{port}", *extra],
        stdout=subprocess.DEVNULL, stderr=log)
    return p, port, f"{name}{os.getpid()}"


def wait_points(coolgp_bin, port, fleet, n, timeout=90):
    return wait_for(lambda s: s.get("points") == n, f"{n} points", coolgp_bin, port, fleet,
                    timeout=timeout, every=0.5)


def test_node_learns_from_a_bag_as_from_csv(coolgp_bin, typestore, tmp_path):
    # Without local memory: the global model is a function of the rows and blocks alone (the
    # pooled fit of a residual kernel runs on the node's clock, so two nodes may fit at
    # different moments).
    fixes, temps = survey(300)
    bag = write_bag(typestore, tmp_path / "run", fixes, temps)
    csv = tmp_path / "run.csv"
    with csv.open("w") as f:
        f.write("latitude,longitude,temperature\n")
        for (_, lat, lon), (_, v) in zip(fixes, temps):
            f.write(f"{lat!r},{lon!r},{v!r}\n")
    queries = tmp_path / "q.csv"
    queries.write_text("latitude,longitude\n48.001,11.003\n48.0035,11.0081\n48.0,11.0\n")
    a, pa, fa = start(coolgp_bin, tmp_path, "bag", bag, "--ros2-input", INPUT, "--ros2-target", TARGET,
                      "--local-memory", "0")
    b, pb, fb = start(coolgp_bin, tmp_path, "csv", csv, "--target", "temperature",
                      "--inputs", "latitude,longitude", "--local-memory", "0")
    try:
        sa = wait_points(coolgp_bin, pa, fa, 300)
        sb = wait_points(coolgp_bin, pb, fb, 300)
        assert sa["rows_skipped"] == sb["rows_skipped"] == 0
        answers = []
        for port, fleet in [(pa, fa), (pb, fb)]:
            _, out, _ = run([coolgp_bin, "query", "--connect", f"tcp/127.0.0.1:{port}",
                             "--fleet", fleet, "--agent", "1", "--input", queries])
            answers.append(out)
        assert answers[0] == answers[1] and len(answers[0].splitlines()) == 4, answers
    finally:
        stop(a)
        stop(b)


def test_a_killed_node_resumes_its_bag_where_it_stopped(coolgp_bin, typestore, tmp_path):
    fixes, temps = survey(400)
    bag = write_bag(typestore, tmp_path / "run", fixes, temps)
    args = ["--ros2-input", INPUT, "--ros2-target", TARGET, "--state", tmp_path / "state",
            "--checkpoint-every", "1"]
    p, port, fleet = start(coolgp_bin, tmp_path, "kill", bag, *args, round_ms=100)
    try:
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                if 60 <= status(coolgp_bin, port, fleet).get("points", 0) < 400:
                    break
            except AssertionError:
                pass
            time.sleep(0.2)
        p.send_signal(signal.SIGKILL)
        p.wait()
        p, port, fleet = start(coolgp_bin, tmp_path, "kill", bag, *args, round_ms=20)
        st = wait_points(coolgp_bin, port, fleet, 400)
        time.sleep(1.0)
        assert status(coolgp_bin, port, fleet)["points"] == 400  # nothing counted twice
        assert st["rows_skipped"] == 0
    finally:
        stop(p)
