#!/usr/bin/env bash
# Installs everything the suite needs on a fresh Debian 12 machine, idempotently:
# RabbitMQ from the Debian package (for the private local target; the system service is not used)
# and this package with its Python dependencies, plus the STOMP plugin package and ActiveMQ Classic.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
if [ ! -x /usr/lib/rabbitmq/bin/rabbitmq-server ]; then
  echo "install: rabbitmq-server (Debian package)" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    -o DPkg::Lock::Timeout=900 rabbitmq-server >/dev/null
fi
# The report pipeline runs Spark on a JVM; the report's browser test loads the page in Chromium.
missing=()
# The Qpid Proton example broker: the non-RabbitMQ AMQP 1.0 target (--target proton-example).
# (Debian 12 ships it in libqpid-proton11-dev-examples, not in python-qpid-proton-doc.)
[ -f /usr/share/proton/examples/python/broker.py ] || missing+=(libqpid-proton11-dev-examples)
command -v java >/dev/null 2>&1 || missing+=(openjdk-17-jre-headless)
# ActiveMQ Classic 5.17: the second STOMP broker (--target activemq-local, packages/conformance-stomp).
[ -f /usr/share/activemq/bin/activemq.jar ] || missing+=(activemq)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
# nft: the partition fault of the cluster target (conformance/nemesis/netfilter.py) drops packets
# between the nodes' loopback addresses with a table of its own.
command -v nft >/dev/null 2>&1 || [ -x /usr/sbin/nft ] || missing+=(nftables)
if [ ${#missing[@]} -gt 0 ]; then
  echo "install: ${missing[*]} (Debian packages)" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
    -o DPkg::Lock::Timeout=900 "${missing[@]}" >/dev/null
fi
# The seed brokers built from their upstream tags (LavinMQ 1.3.1 and 2.9.1, qpidd 1.39.0), where a
# development or CI machine keeps them beside the checkout: their runtime libraries, so that the
# process targets and the tests that run the catalogue on them can start them.
if [ -x ../shared/brokers/deps.sh ]; then
  echo "install: the seed brokers' runtime libraries (../shared/brokers/deps.sh)" >&2
  ../shared/brokers/deps.sh
fi
echo "install: python package and dependencies" >&2
# The docs extra brings mkdocs: the tests build the manual (docs/) with --strict.
PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --disable-pip-version-check -e '.[docs]'
# The STOMP plugin is its own package (found through entry points only; the core never imports it).
PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --disable-pip-version-check -e packages/conformance-stomp
# Byte-compile the source tree once: an editable install leaves it uncompiled, and where
# PYTHONDONTWRITEBYTECODE is set every process (each catalogue run, each self-test run) would
# compile ~100 modules again. Python still reads a .pyc it did not write; a stale one is ignored.
python3 -m compileall -q -j 0 conformance adapters reports packages >/dev/null
# The report's driver JVM maps a class archive recorded once per machine (reports/class_archive.py,
# about 20 s here): every report then starts about 2 s sooner. A failure only leaves reports as
# they were (one line on stderr).
echo "install: the report JVM's class archive" >&2
python3 -m reports.class_archive || true
