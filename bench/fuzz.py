"""Fuzz the collector's untrusted-input path: no crash, no hang, whatever the bytes.

Inputs are mutations of valid OTLP exports (protobuf and OTLP/JSON: bit flips, truncations, spliced
and duplicated chunks, random bytes, gzip of all of these), fed to what a receiver runs on a request
body: inflate -> decode -> and, for whatever decodes, rebuild and the rule annotators. The only
acceptable outcomes are a decoded request or the receivers' own error types (which become 400/413/415
or INVALID_ARGUMENT). Anything else, or an input that takes over a second, is a finding.

    python bench/fuzz.py --inputs 100000 --json
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import sys
import time
from collections import defaultdict
from pathlib import Path

from google.protobuf import json_format

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ingest import generate_requests
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from mast_otel.annotate.rules import RuleAnnotator
from mast_otel.collector.decode import DecodeError, TraceDecoder
from mast_otel.collector.receiver_http import BodyError, decode_json_request, inflate
from mast_otel.conversation.rebuild import rebuild
from mast_otel.spans import Span

LIMIT = 4 * 1024 * 1024
SLOW_S = 1.0


def mutate(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.choice((1, 1, 1, 2, 3, 8))):  # mostly light damage: deeper code paths
        choice = rng.random()
        if not out or choice < 0.1:
            out = bytearray(rng.randbytes(rng.randint(0, 256)))
        elif choice < 0.4:
            for _ in range(rng.randint(1, 16)):
                out[rng.randrange(len(out))] ^= 1 << rng.randrange(8)
        elif choice < 0.55:
            del out[rng.randrange(len(out)) :]
        elif choice < 0.7:
            start = rng.randrange(len(out))
            chunk = out[start : start + rng.randint(1, 64)]
            at = rng.randrange(len(out))
            out[at:at] = chunk * rng.randint(1, 4)
        elif choice < 0.85:
            at = rng.randrange(len(out))
            out[at:at] = rng.randbytes(rng.randint(1, 32))
        else:
            a, b = sorted(rng.randrange(len(out)) for _ in range(2))
            out[a:b] = out[a:b][::-1]
    return bytes(out)


def seeds() -> tuple[list[bytes], list[bytes]]:
    bodies, _ = generate_requests(300, seed=3, batch=8)
    small = [b for b in bodies if len(b) < 64 * 1024][:20] or bodies[:5]
    as_json = []
    for body in small:
        tree = json_format.MessageToDict(ExportTraceServiceRequest.FromString(body))
        as_json.append(json.dumps(_ids_to_hex(tree)).encode())
    return small, as_json


def _ids_to_hex(node: object) -> object:
    import base64

    if isinstance(node, dict):
        return {
            k: base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") else _ids_to_hex(v)
            for k, v in node.items()
        }
    if isinstance(node, list):
        return [_ids_to_hex(v) for v in node]
    return node


def run(inputs: int, seed: int) -> dict[str, object]:
    rng = random.Random(seed)
    protobuf_seeds, json_seeds = seeds()
    decoder = TraceDecoder()
    annotator = RuleAnnotator()
    outcomes: dict[str, int] = defaultdict(int)
    crashes: list[str] = []
    slowest = 0.0
    started = time.perf_counter()
    for n in range(inputs):
        as_json = rng.random() < 0.3
        body = mutate(rng, rng.choice(json_seeds if as_json else protobuf_seeds))
        encoding = ""
        if rng.random() < 0.1:
            body, encoding = gzip.compress(body), "gzip"
        t0 = time.perf_counter()
        try:
            raw = inflate(body, encoding, LIMIT)
            decoded = decoder.decode(decode_json_request(raw)) if as_json else decoder.decode_bytes(raw)
            by_trace: dict[str, list[Span]] = defaultdict(list)
            for span in decoded.spans:
                by_trace[span.trace_id].append(span)
            for spans in by_trace.values():
                annotator.annotate(rebuild(spans))
            outcomes["decoded"] += 1
            outcomes["spans_decoded"] += len(decoded.spans)
        except (DecodeError, BodyError):
            outcomes["refused"] += 1
        except Exception as exc:  # a crash: record the input that caused it
            crashes.append(f"input {n}: {type(exc).__name__}: {exc}")
        slowest = max(slowest, time.perf_counter() - t0)
    elapsed = time.perf_counter() - started
    return {
        "inputs": inputs,
        "decoded": outcomes["decoded"],
        "refused_cleanly": outcomes["refused"],
        "spans_decoded": outcomes["spans_decoded"],
        "crashes": len(crashes),
        "crash_examples": crashes[:5],
        "slowest_input_s": round(slowest, 4),
        "hangs": int(slowest > SLOW_S),
        "inputs_per_s": round(inputs / elapsed),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--inputs", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.inputs, args.seed)
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 0 if not result["crashes"] and not result["hangs"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
