"""A fuzzer for the program layer: mutated golden programs through `parse_program` + `make_plan`.

Every outcome must be a plan or a `SpindleError` with a known reason (SQL reasons located inside
the text). `python -m tests.fuzz --count N` prints the counts by outcome (`make fuzz N=10000`);
`test_fuzz.py` runs 1,000 mutants with a fixed seed in CI.
"""
