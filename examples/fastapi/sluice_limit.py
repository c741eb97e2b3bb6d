"""A FastAPI dependency that asks a running `sluice serve` for a decision (POST /v1/check) and
answers a denial with 429, Retry-After, the rate-limit headers and the JSON body of Sluice's own
adapters. Needs fastapi and httpx (docs/clients.md).

    limit = SluiceLimit("http://127.0.0.1:8080", policy="api")
    app = FastAPI()
    limit.install(app)  # the handler that writes the 429 / 503 body

    @app.get("/hello", dependencies=[Depends(limit)])
    async def hello(): ...
"""

import json
import logging
import math
import time
from typing import Callable, Optional
from urllib.parse import urlsplit

import httpx
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse

log = logging.getLogger("sluice")

FAIL_MODES = ("open", "closed")


class SluiceOptionError(ValueError):
    """A bad option, raised once, when SluiceLimit is built."""

    code = "SLUICE_INVALID_OPTIONS"


class SluiceRejected(Exception):
    """Raised by the dependency on a denial; the handler `install` adds turns it into the answer."""

    def __init__(self, status: int, headers: dict[str, str], body: dict[str, object]):
        super().__init__(body["error"])
        self.status = status
        self.headers = headers
        self.body = body


def client_ip(request: Request) -> str:
    """The default key: the peer's address as "ip:<address>", the name /v1/authz and Sluice's HTTP
    middleware give an IPv4 client. Behind a proxy, pass a key that reads its header."""
    return "ip:" + (request.client.host if request.client is not None else "unknown")


def _non_negative(n: object) -> int:
    return int(n) if isinstance(n, (int, float)) and not isinstance(n, bool) and n > 0 else 0


def _seconds(ms: int) -> int:
    return math.ceil(_non_negative(ms) / 1000)


def _sf_string(name: str) -> str:
    printable = "".join(c if 0x20 <= ord(c) <= 0x7E else "?" for c in name)
    return '"' + printable.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _wait(d: dict) -> int:
    return max(1, _seconds(d.get("retryAfterMs", 0)))


def rate_limit_headers(d: dict, now_ms: Optional[int] = None) -> dict[str, str]:
    """The headers the JSON answer allows: everything the adapters send, except that the answer
    has no window, so RateLimit-Policy carries q only (`"api";q=20`)."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    allowed = d.get("allowed") is True
    reset_ms = _non_negative(d.get("resetMs")) if allowed else max(1, _non_negative(d.get("retryAfterMs")))
    limit = _non_negative(d.get("limit"))
    remaining = _non_negative(d.get("remaining"))
    name = _sf_string(str(d.get("policy", "")))
    headers = {
        "X-RateLimit-Limit": str(limit),
        "X-RateLimit-Remaining": str(remaining),
        "X-RateLimit-Reset": str(math.ceil((now_ms + reset_ms) / 1000)),
        "RateLimit-Policy": f"{name};q={limit}",
        "RateLimit": f"{name};r={remaining};t={_seconds(reset_ms)}",
    }
    if not allowed:
        headers["Retry-After"] = str(_wait(d))
    return headers


def _wait_text(seconds: int) -> str:
    return "1 second" if seconds == 1 else f"{seconds} seconds"


def denial_body(d: dict) -> tuple[int, dict[str, object]]:
    """Status and body as Sluice's adapters send them (src/http/headers.ts rateLimitBody)."""
    wait = _wait(d)
    if d.get("reason") == "store_unavailable":
        return 503, {
            "error": "store_unavailable",
            "message": f"The rate limiter cannot reach its store. Please try again in {_wait_text(wait)}.",
            "retry_after": wait,
            "policy": d.get("policy"),
        }
    return 429, {
        "error": "rate_limit_exceeded",
        "message": f"Too many requests. Please try again in {_wait_text(wait)}.",
        "retry_after": wait,
        "policy": d.get("policy"),
    }


class SluiceLimit:
    """A dependency: `Depends(limit)` on a route, or `dependencies=[Depends(limit)]` on the app."""

    def __init__(
        self,
        service_url: str,
        policy: str,
        *,
        key: Callable[[Request], str] = client_ip,
        tier: Optional[Callable[[Request], Optional[str]]] = None,
        cost: int = 1,
        fail_mode: str = "open",
        timeout: float = 0.5,
        client: Optional[httpx.AsyncClient] = None,
    ):
        parts = urlsplit(service_url) if isinstance(service_url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
            raise SluiceOptionError(f"service_url {service_url!r} is not an http(s) URL, use e.g. http://127.0.0.1:8080")
        if not isinstance(policy, str) or policy == "":
            raise SluiceOptionError("policy is empty, name a policy of the service's config")
        if not isinstance(cost, int) or isinstance(cost, bool) or cost < 1:
            raise SluiceOptionError(f"cost {cost!r} is not a whole number above 0")
        if fail_mode not in FAIL_MODES:
            raise SluiceOptionError(f"fail_mode {fail_mode!r}, use 'open' or 'closed'")
        if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
            raise SluiceOptionError(f"timeout {timeout!r} is not a number of seconds above 0")
        self.check_url = service_url.rstrip("/") + "/v1/check"
        self.policy = policy
        self.key = key
        self.tier = tier
        self.cost = cost
        self.fail_mode = fail_mode
        self.timeout = timeout
        self._client = client

    def install(self, app: FastAPI) -> None:
        """Register the handler that answers a SluiceRejected (429, or 503)."""

        async def rejected(_request: Request, exc: SluiceRejected) -> JSONResponse:
            return JSONResponse(exc.body, status_code=exc.status, headers=exc.headers)

        app.add_exception_handler(SluiceRejected, rejected)

    def _http(self) -> httpx.AsyncClient:
        # Made on first use, inside the server's event loop; kept for its pooled connections.
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.timeout)
        return self._client

    async def _check(self, request: Request) -> dict:
        body: dict[str, object] = {"policy": self.policy, "key": self.key(request), "cost": self.cost}
        tier = self.tier(request) if self.tier is not None else None
        if tier:
            body["tier"] = tier
        res = await self._http().post(
            self.check_url,
            content=json.dumps(body),
            headers={"content-type": "application/json"},  # anything else is 415
            timeout=self.timeout,
        )
        if res.status_code != 200:
            raise RuntimeError(f"the service answered {res.status_code}: {res.text[:500]}")
        decision = res.json()
        if not isinstance(decision, dict) or not isinstance(decision.get("allowed"), bool):
            raise RuntimeError("the service's answer is not a decision")
        decision.setdefault("policy", self.policy)
        return decision

    async def __call__(self, request: Request, response: Response) -> dict:
        try:
            decision = await self._check(request)
        except Exception as err:  # down, too slow, not a decision: the fail mode decides
            log.warning("sluice: %s %s: %s", request.method, request.url.path, str(err) or type(err).__name__)
            if self.fail_mode == "open":
                return {"allowed": True, "unchecked": True}
            raise SluiceRejected(
                503,
                {"Retry-After": "1"},
                {
                    "error": "store_unavailable",
                    "message": "The rate limiter cannot reach its store. Please try again in 1 second.",
                    "retry_after": 1,
                    "policy": self.policy,
                },
            ) from err
        headers = rate_limit_headers(decision)
        if not decision["allowed"]:
            status, body = denial_body(decision)
            raise SluiceRejected(status, headers, body)
        for name, value in headers.items():
            response.headers[name] = value
        return decision
