"""A small FastAPI service limited by Sluice: GET /hello, one policy, keyed on the caller. The tests
in test/clients/fastapi.test.ts run it against a real `sluice serve`.

    SLUICE_URL=http://127.0.0.1:8080 SLUICE_POLICY=api SLUICE_FAIL_MODE=closed PORT=3000 python3 app.py
"""

import os
import socket

import uvicorn
from fastapi import Depends, FastAPI, Request

from sluice_limit import SluiceLimit, client_ip


def caller(request: Request) -> str:
    # Stand-in for an authenticated user id; without it, the client IP.
    user = request.headers.get("x-user")
    return f"user:{user}" if user else client_ip(request)


limit = SluiceLimit(
    os.environ.get("SLUICE_URL", "http://127.0.0.1:8080"),
    policy=os.environ.get("SLUICE_POLICY", "api"),
    key=caller,
    fail_mode=os.environ.get("SLUICE_FAIL_MODE", "open"),
)
app = FastAPI()
limit.install(app)


@app.get("/healthz")  # outside the limit: what a load balancer probes
async def healthz() -> str:
    return "ok"


@app.get("/hello", dependencies=[Depends(limit)])
async def hello() -> dict:
    return {"hello": "world"}


if __name__ == "__main__":
    # Bound here rather than by uvicorn, so that PORT=0 (any free port) can say where it landed.
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(os.environ.get("PORT", "3000"))))
    host, port = listener.getsockname()
    print(f"demo listening on http://{host}:{port}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[listener])
