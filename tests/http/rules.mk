# HTTP/TLS test peers for the HTTP client (issue 3): certificates, nginx,
# Python ssl servers, the scripted fault server, a CONNECT proxy, and
# mbedTLS 3.6 built from Debian trixie's source package.
#
#   make http-peers-up        start the peers; build/http-peers/peers.json says where
#   make http-peers-down      stop exactly those
#   make http-peers-selftest  up, check each peer with curl/openssl, down
#   make mbedtls3             mbedTLS 3.6 into $(MBEDTLS3_PREFIX) (no-op when there)
#
# A test that needs the peers runs under tests/http/with-peers.sh, which
# brings them up, exports ASB_PEER_* (peers.env), runs it, and stops them.

HTTP_PEERS_DIR  := $(BUILD)/http-peers
MBEDTLS3_PREFIX ?= $(or $(HOME),/root)/.cache/agentsandbox/mbedtls-3.6
# For test programs built against 3.6 instead of Debian's 2.28:
MBEDTLS3_CFLAGS := -I$(MBEDTLS3_PREFIX)/include
MBEDTLS3_LIBS   := $(MBEDTLS3_PREFIX)/lib/libmbedtls.a $(MBEDTLS3_PREFIX)/lib/libmbedx509.a \
                   $(MBEDTLS3_PREFIX)/lib/libmbedcrypto.a -lpthread

.PHONY: http-peers-up http-peers-down http-peers-selftest mbedtls3
http-peers-up:
	@python3 tests/http/peers.py start $(HTTP_PEERS_DIR)
http-peers-down:
	@python3 tests/http/peers.py stop $(HTTP_PEERS_DIR)
http-peers-selftest:
	@tests/http/with-peers.sh $(HTTP_PEERS_DIR) tests/http/selftest.sh $(HTTP_PEERS_DIR)
mbedtls3:
	@tests/http/mbedtls3.sh $(MBEDTLS3_PREFIX)

# cmake builds mbedTLS; dpkg-dev (dpkg-source), bzip2 and xz-utils unpack
# its source package. nginx-light, curl, openssl, python3: in DEB_PACKAGES.
EXTRA_DEB_PACKAGES += cmake dpkg-dev bzip2 xz-utils

TEST_TIERS         += http-peers-selftest
EXTRA_DEPS_TARGETS += mbedtls3
