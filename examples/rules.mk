# Examples build as part of `make` and run in `make test`.
EX := $(BUILD)/examples
$(EX)/%: examples/%.c agentsandbox.h
	@mkdir -p $(@D)
	$(CC) -std=c99 $(OPT) $(CFLAGS_WARN) $< -o $@ $(TLS_LIBS) -lm -pthread
EXAMPLES := $(patsubst examples/%.c,$(EX)/%,$(wildcard examples/*.c))
ALL_TARGETS += $(EXAMPLES)

.PHONY: test-examples
TEST_TIERS += test-examples
test-examples: $(EXAMPLES)
	@out=$$(printf '%s' '{"status":{"sandbox":{"name":"sb-1"},"conditions":[{"type":"Ready","status":"False","reason":"TemplateNotFound"}]}}' | $(EX)/json_lookup); \
	echo "$$out"; \
	test "$$out" = "$$(printf 'sandbox: sb-1\ncondition Ready=False (TemplateNotFound)')" || \
	  { echo "examples: json_lookup printed the wrong thing"; exit 1; }; \
	if printf '{"a":1,}' | $(EX)/json_lookup 2>/dev/null; then \
	  echo "examples: json_lookup accepted invalid JSON"; exit 1; fi
