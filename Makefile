# The project's test command (README, .ci/run): the whole test suite, then every
# fuzz target briefly (its committed corpus and FUZZTIME of new inputs).

FUZZTIME ?= 5s

.PHONY: test fuzz

test:
	go test -count=1 -timeout 15m ./...
	$(MAKE) --no-print-directory fuzz

# fuzz runs each fuzz target in the module for FUZZTIME (make fuzz FUZZTIME=10m
# for a real session); a failing input is written to the package's
# testdata/fuzz and fails the run.
fuzz:
	@set -e; for f in $$(git ls-files '*_test.go' | xargs grep -l '^func Fuzz'); do \
	  d=./$$(dirname $$f); \
	  for n in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
	    echo "fuzz $$d $$n for $(FUZZTIME)"; \
	    go test -run '^$$' -fuzz "^$$n$$" -fuzztime $(FUZZTIME) $$d; \
	  done; \
	done
