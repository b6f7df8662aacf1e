# The two commands of the README. Both install what they need first (idempotent, cached).
.PHONY: setup app test test-fast bench
setup:
	bash scripts/setup.sh
app:  # the viewer only (about a minute on a fresh clone); captures need `make setup`
	APP_ONLY=1 bash scripts/setup.sh
	.venv/bin/python app.py
test: setup  # two pytest-xdist workers, grouped (RI_TEST_WORKERS=0: one process; docs/TESTING.md#parallel-runs)
	RI_TEST_WORKERS=$${RI_TEST_WORKERS:-2} bash scripts/test.sh
test-fast:  # the inner loop, under 90 s: no test marked browser or slow (docs/TESTING.md; needs a previous `make setup`)
	APP_ONLY=1 bash scripts/setup.sh
	RI_TEST_WORKERS=$${RI_TEST_WORKERS:-2} RI_TEST_TIER=fast bash scripts/test.sh -m "not browser and not slow" -q
bench: setup
	bash scripts/bench.sh
