# posviz for a team: docker build -t posviz . && docker run -p 8501:8501 posviz
# Settings come from the environment (docs/deployment.md): POSVIZ_DATA_DIR, POSVIZ_CACHE_SIZE,
# STREAMLIT_SERVER_MAX_UPLOAD_SIZE. compose.yaml runs it read-only with a shared model folder.
#
# No Chromium in the image, on purpose: Debian's chromium would add ~400 MB (290 MB installed
# plus its libraries and fonts) to a ~0.8 GB image, only for PNG/SVG figure export. Without
# it those two buttons are disabled with an explanation; the interactive HTML export, every
# chart and every number work. A team that needs PNG/SVG can add
#   RUN apt-get update && apt-get install -y --no-install-recommends chromium ...
# and kaleido finds /usr/bin/chromium on its own.
FROM python:3.11.7-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# Dependencies first: this layer is rebuilt only when the pins change.
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt

# Code stays owned by root and read-only to the app's user.
COPY .streamlit/ .streamlit/
COPY app.py ./
COPY pages/ pages/
COPY posviz/ posviz/

USER 10001
EXPOSE 8501

HEALTHCHECK --interval=30s --timeout=5s --start-period=30s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(urllib.request.urlopen('http://127.0.0.1:8501/_stcore/health', timeout=4).read() != b'ok')"]

# No file watcher: the code in the image never changes, and watching costs inotify handles.
ENTRYPOINT ["streamlit", "run", "app.py", "--server.address=0.0.0.0", "--server.port=8501", "--server.headless=true", "--server.fileWatcherType=none"]
