# ctxc service image: non-root, dependencies in their own layer, migrations run as their own step
# (`ctxc migrate`, see docker-compose.yml) before `ctxc serve`.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /srv/ctxc
RUN groupadd --system --gid 10001 ctxc \
    && useradd --system --uid 10001 --gid ctxc --home-dir /srv/ctxc --shell /usr/sbin/nologin ctxc

# Dependencies first: this layer is rebuilt only when pyproject.toml changes.
COPY pyproject.toml ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
    && pip install --no-cache-dir -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

COPY README.md ./
COPY migrations ./migrations
COPY app ./app
RUN pip install --no-cache-dir --no-deps -e . \
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
