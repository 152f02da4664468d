# coding-agent-exporter in a container. docker-compose.yml builds it, mounts the agent folders
# read-only and shares the host's pid namespace so that live agent processes can be checked.
# The base image pinned to the Python the tests run on; the dependencies to requirements.lock.
FROM python:3.11.7-slim-bookworm

WORKDIR /src
# Pure Python (setup.py's fallback, asked for): compiling the per-record modules would need a C
# compiler and mypy in the image, for a faster catch-up (docs/performance.md).
COPY requirements.lock pyproject.toml setup.py README.md ./
COPY _build ./_build
COPY coding_agent_exporter ./coding_agent_exporter
RUN pip install --no-cache-dir --no-deps -r requirements.lock \
    && CODING_AGENT_EXPORTER_PURE_PYTHON=1 pip install --no-cache-dir --no-deps . \
    && rm -rf /src \
    && useradd --create-home --uid 1000 agent \
    && mkdir -m 1777 /state

# The exporter's own state (the traces checkpoint), never inside an agent's folder; any uid
# that docker-compose.yml runs it as may write here.
ENV XDG_STATE_HOME=/state

USER agent
WORKDIR /home/agent
EXPOSE 10464
HEALTHCHECK --interval=30s --timeout=5s \
  CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:10464/-/healthy', timeout=3)"]

# Inside the container it listens on every interface; docker-compose.yml publishes the port on
# the host's 127.0.0.1 only.
ENTRYPOINT ["coding-agent-exporter"]
CMD ["--web.listen-address", "0.0.0.0:10464"]
