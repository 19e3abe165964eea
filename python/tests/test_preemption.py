"""hpcml.Preemption: the signals through Python's handlers, the spot poller
(hpcml's C++ one, against a local HTTP server), the usage record a job
writes for hpcml-cost, and the exit code Slurm requeues on."""
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import hpcml


def test_signals_set_a_flag_and_handlers_are_restored():
    before = signal.getsignal(signal.SIGUSR1)
    stop = hpcml.Preemption().install()
    assert not stop.should_stop() and stop.reason == ""
    os.kill(os.getpid(), signal.SIGUSR1)  # runs the handler between bytecodes
    assert stop.local_reason() == "SIGUSR1"
    assert stop.should_stop() and stop.reason == "SIGUSR1"
    os.kill(os.getpid(), signal.SIGTERM)  # the first signal is the reason
    assert stop.reason == "SIGUSR1"
    stop.uninstall()
    assert signal.getsignal(signal.SIGUSR1) == before


class Notice(http.server.BaseHTTPRequestHandler):
    notice = False

    def do_GET(self):
        if self.path != "/latest/meta-data/spot/instance-action" or not Notice.notice:
            self.send_response(404)
            self.end_headers()
            return
        body = json.dumps({"action": "terminate", "time": "2026-11-27T12:00:00Z"}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_spot_notice_through_the_cpp_poller():
    server = http.server.HTTPServer(("127.0.0.1", 0), Notice)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}/latest/meta-data/spot/instance-action"
    stop = hpcml.Preemption(spot_url=url, spot_poll_s=0.05).install()
    try:
        time.sleep(0.3)
        assert not stop.should_stop()
        Notice.notice = True
        deadline = time.time() + 10
        while not stop.should_stop():
            assert time.time() < deadline, "no spot notice seen"
            time.sleep(0.05)
        assert stop.reason == "spot notice"
    finally:
        stop.uninstall()
        server.shutdown()
    with pytest.raises(hpcml.Error, match="ftp://"):
        hpcml.Preemption(spot_url="ftp://x/y").install()


def test_usage_record_inside_a_job(tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "4242")
    monkeypatch.setenv("SLURM_RESTART_COUNT", "1")
    monkeypatch.setenv("SLURM_GPUS_ON_NODE", "2")
    monkeypatch.setenv("SLURM_JOB_NUM_NODES", "2")
    stop = hpcml.Preemption(usage_dir=str(tmp_path), gpu_type="h100")
    stop.publish_usage(steps_done=300, batch=1024, steps_since_checkpoint=20,
                       checkpoint_seconds=1.5, no_comment=True)
    files = list(tmp_path.glob("usage-4242-r1.json"))
    assert len(files) == 1, list(tmp_path.iterdir())
    rec = json.loads(files[0].read_text())
    text = json.dumps(rec)
    assert "4242" in text and "h100" in text and "300" in text, rec


def test_exit_code_requeues():
    """exit() ends the process at once with 85, its buffered output written
    (stdout to a pipe is block-buffered), atexit handlers not run."""
    code = ("import atexit, hpcml, os, signal; s = hpcml.Preemption().install(); "
            "atexit.register(print, 'teardown ran'); "
            "os.kill(os.getpid(), signal.SIGTERM); assert s.should_stop(); "
            "print('saved', s.reason); s.exit()")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == hpcml.REQUEUE_EXIT_CODE == 85, r.stderr
    assert r.stdout == "saved SIGTERM\n", r.stdout
