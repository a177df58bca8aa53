# The project's test command (README, .ci/run): the whole test suite, then every
# fuzz target briefly (its committed corpus and FUZZTIME of new inputs).

# FUZZTIME is a number of inputs (Nx), not a duration: with a duration, Go
# 1.26's fuzz coordinator can fail a target with a bare "context deadline
# exceeded" and no failing input when its deadline fires while a worker is
# mid-call (its stop() lets the deadline's error through unless the workers'
# context is already cancelled), which a loaded machine makes likely; a
# count has no deadline. 50000 inputs take 1-3 s for most
# targets, 10-20 s for lfs's FuzzConfined (which makes real files).
FUZZTIME ?= 50000x

.PHONY: test fuzz

test:
	go test -count=1 -timeout 15m ./...
	$(MAKE) --no-print-directory fuzz

# fuzz runs each fuzz target in the module for FUZZTIME (make fuzz FUZZTIME=10m
# for a real session; a duration may end with the spurious deadline failure
# above); a failing input is written to the package's testdata/fuzz and fails
# the run.
fuzz:
	@set -e; for f in $$(git ls-files '*_test.go' | xargs grep -l '^func Fuzz'); do \
	  d=./$$(dirname $$f); \
	  for n in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
	    echo "fuzz $$d $$n for $(FUZZTIME)"; \
	    go test -run '^$$' -fuzz "^$$n$$" -fuzztime $(FUZZTIME) $$d; \
	  done; \
	done
