# ctxc service image, built from a wheel (not the source tree): non-root, the locked dependencies
# in a layer of their own, migrations run as their own step (`ctxc migrate`, see
# docker-compose.yml) before `ctxc serve`. The build context is only what .dockerignore lets in.

# Stage 1: the wheel (it carries the migrations, as app/migrations).
FROM python:3.11-slim AS wheel
ENV PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY migrations ./migrations
COPY app ./app
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /dist .

# Stage 2: the service.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /srv/ctxc
RUN groupadd --system --gid 10001 ctxc \
    && useradd --system --uid 10001 --gid ctxc --home-dir /srv/ctxc --shell /usr/sbin/nologin ctxc

# Dependencies first, exactly as locked (hashes checked): rebuilt only when the lock changes.
COPY requirements.lock /tmp/requirements.lock
RUN pip install --no-cache-dir --require-hashes -r /tmp/requirements.lock \
    && rm /tmp/requirements.lock

COPY --from=wheel /dist /tmp/dist
RUN pip install --no-cache-dir --no-deps /tmp/dist/*.whl \
    && pip check \
    && rm -r /tmp/dist \
    && mkdir -p /srv/ctxc/data \
    && chown 10001:10001 /srv/ctxc/data

USER 10001:10001
ENV CTXC_HOST=0.0.0.0 \
    CTXC_PORT=8080 \
    CTXC_AUTH=keys
VOLUME ["/srv/ctxc/data"]
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2)"]
CMD ["ctxc", "serve"]
