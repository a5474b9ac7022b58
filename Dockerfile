# The Spindle operator image: Python, no Java (the operator never imports pyspark), non-root.
#   docker build -t ghcr.io/spindle-dev/spindle-operator:0.1.0 .
# BASE is any image with Python 3.11 and its venv module; the test harness passes a Debian base
# it builds with debootstrap. A CA bundle for a TLS-intercepting package proxy can be lent to
# the pip steps as the build secret `ca` (`--secret id=ca,src=...`); it never enters the image.
ARG BASE=python:3.11.14-slim-bookworm

FROM ${BASE} AS build
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY operator ./operator
RUN --mount=type=secret,id=ca \
    if [ -f /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi \
 && python3 -m venv /opt/build \
 && /opt/build/bin/pip install --no-cache-dir "pip==26.3" "setuptools==84.2.1" "wheel==0.48.0" \
 && /opt/build/bin/pip wheel --no-cache-dir --no-deps -w /wheels .

FROM ${BASE}
ENV PATH=/opt/spindle/venv/bin:$PATH
COPY constraints.txt /tmp/constraints.txt
COPY --from=build /wheels /wheels
RUN --mount=type=secret,id=ca \
    if [ -f /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi \
 && python3 -m venv /opt/spindle/venv \
 && pip install --no-cache-dir -c /tmp/constraints.txt "$(ls /wheels/spindle-*.whl)[operator]" \
 && rm -rf /wheels /tmp/constraints.txt \
 && useradd --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin spindle
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["spindle"]
CMD ["operator", "--all-namespaces"]
