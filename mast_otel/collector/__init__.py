"""The collector: receive OTLP, assemble traces, run the pipeline (rebuild -> annotate -> store).

`decode.py` and `receiver_grpc.py` receive, `assembly.py` groups spans into complete traces,
`pipeline.py` rebuilds, annotates and stores them, `service.py` wires it all from one config and
`query_api.py` serves health and read-only queries.
"""
