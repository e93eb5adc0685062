"""A minimal GRPO reward server (docs/grpo.md, "Reward servers over HTTP").

    python3 examples/rewards/reward_server.py 8000
    ptrain train -c configs/grpo.toml \
        --set 'module.reward_funcs=["accuracy", "http://127.0.0.1:8000/closeness"]'

ptrain POSTs each step's batch as one JSON object of parallel lists
(prompts, completions, completion_tokens, truncated, and the dataset fields)
and reads back {"rewards": [one number per completion]}. The scoring is
examples/rewards/arith_rewards.py's, so both forms give the same metrics.
"""
import http.server
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import arith_rewards  # noqa: E402


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        batch = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        function = getattr(arith_rewards, self.path.strip("/"), None)
        if function is None or self.path.strip("/").startswith("_"):
            return self.reply(404, {"error": "no reward function " + self.path})
        self.reply(200, {"rewards": function(**batch)})

    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
