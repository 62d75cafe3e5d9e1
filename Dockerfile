# ssdfeed: the `ssdfeed` command and the Python package, run as a non-root
# user, with the node's cache SSD mounted on /var/cache/ssdfeed.
#
#   podman build --isolation chroot -t ssdfeed .            (or docker build)
#   podman build --build-arg BASE=localhost/debian-minbase --build-arg WHEELS=context ...
#
# BASE: a Debian 12 (bookworm) image; `make image` makes one offline with
#   mmdebstrap --variant=minbase and `podman import` when no registry is at hand.
# WHEELS=source (default) compiles the wheel in the build stage;
# WHEELS=context takes prebuilt Debian 12 / CPython 3.11 wheels from
#   dist/image-wheels/ in the build context (`make image` builds them on the
#   host with pip wheel, reusing its build directory: minutes on a small
#   builder). Either way the runtime stage gets only the wheel.
ARG BASE=docker.io/library/debian:bookworm-slim
ARG WHEELS=source

FROM ${BASE} AS wheels-source
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      ca-certificates build-essential cmake ninja-build pkg-config python3 python3-dev python3-venv \
      libturbojpeg0-dev libspng-dev libopencv-imgproc-dev liburing-dev libxxhash-dev libarchive-dev \
      libcli11-dev nlohmann-json3-dev prometheus-cpp-dev libcurl4-openssl-dev libssl-dev >/dev/null \
 && rm -rf /var/lib/apt/lists/*
# pip reaches the package index through the builder's pip configuration:
# `make image` mounts its config files (podman build -v) and passes these as
# build arguments (a CA bundle is mounted beside the image's own, which
# ca-certificates writes). Plain `docker build` uses PyPI. Build arguments of
# this stage are not kept in the final image.
ARG PIP_CERT
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_FIND_LINKS
ARG PIP_TRUSTED_HOST
ARG PIP_DEFAULT_TIMEOUT
WORKDIR /src
COPY . .
RUN python3 -m venv /opt/build \
 && /opt/build/bin/pip install -q "scikit-build-core>=0.10" "nanobind>=2.0" \
 && rm -rf build dist \
 && CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) /opt/build/bin/pip wheel -q --no-build-isolation --no-deps -w /wheels .

FROM ${BASE} AS wheels-context
COPY dist/image-wheels/ /wheels/

FROM wheels-${WHEELS} AS wheels

FROM ${BASE}
# Runtime libraries only (no compilers, no -dev packages). numpy comes from
# Debian, so installing the wheel needs no package index.
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      ca-certificates python3 python3-venv python3-numpy \
      libturbojpeg0 libspng0 libopencv-imgproc406 libopencv-core406 liburing2 libxxhash0 libarchive13 \
      libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libcurl4 libssl3 >/dev/null \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*
COPY --from=wheels /wheels/ /tmp/wheels/
RUN python3 -m venv --system-site-packages /opt/ssdfeed \
 && /opt/ssdfeed/bin/pip install -q --no-index --no-deps --no-cache-dir /tmp/wheels/ssdfeed-*.whl \
 && rm -rf /tmp/wheels \
 && /opt/ssdfeed/bin/ssdfeed --version
# uid/gid 10001 match deploy/kubernetes. Any --user UID:GID works on a mounted
# cache directory that user owns (or shares with --group-shared); the image's
# own /var/cache/ssdfeed is 0700 because the cache refuses a root others may
# write to.
RUN groupadd --gid 10001 ssdfeed \
 && useradd --uid 10001 --gid 10001 --home-dir /home/ssdfeed --create-home --shell /usr/sbin/nologin ssdfeed \
 && mkdir -p /var/cache/ssdfeed && chown 10001:10001 /var/cache/ssdfeed && chmod 0700 /var/cache/ssdfeed
ENV PATH=/opt/ssdfeed/bin:$PATH \
    SSDFEED_CACHE=/var/cache/ssdfeed \
    PYTHONDONTWRITEBYTECODE=1
VOLUME /var/cache/ssdfeed
USER 10001:10001
WORKDIR /home/ssdfeed
ENTRYPOINT ["ssdfeed"]
CMD ["--help"]
