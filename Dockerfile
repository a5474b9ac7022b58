# The Spindle operator image: slim Python, no Java (the operator never imports pyspark), non-root.
#   docker build -t ghcr.io/spindle-dev/spindle-operator:0.1.0 .
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml constraints.txt README.md ./
COPY operator ./operator
RUN pip install --no-cache-dir "pip==26.3" "setuptools==84.2.1" "wheel==0.48.0" \
 && pip wheel --no-cache-dir --no-deps -w /wheels .

FROM ${PYTHON_IMAGE}
COPY constraints.txt /tmp/constraints.txt
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir -c /tmp/constraints.txt "$(ls /wheels/spindle-*.whl)[operator]" \
 && rm -rf /wheels /tmp/constraints.txt \
 && useradd --uid 10001 --user-group --no-create-home --shell /usr/sbin/nologin spindle
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["spindle"]
CMD ["operator", "--all-namespaces"]
