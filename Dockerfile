# ssdfeed: the `ssdfeed` command and the Python package, run as a non-root
# user, with the node's cache SSD mounted on /var/cache/ssdfeed (-v).
#
#   docker build -t ssdfeed .        (or podman build -t ssdfeed .)
#   podman build --build-arg BASE=localhost/debian-minbase --build-arg WHEELS=context ...
#
# BASE: a Debian 12 (bookworm) image. The default is pinned by digest, so a
# rebuild gets the same base whatever the tag points at now; the tag in front
# of the digest only says what it is. To move to a newer base, replace the
# digest with what `skopeo inspect --format '{{.Digest}}'
# docker://docker.io/library/debian:bookworm-slim` (or `docker buildx
# imagetools inspect`) prints. A digest pins registry images only: an image
# made locally (`make image` makes localhost/debian-minbase offline with
# mmdebstrap --variant=minbase and `podman import` when no registry is at
# hand) has no registry digest to pin, and is passed as --build-arg BASE=NAME;
# pass BASE=NAME@sha256:... to pin another registry's image.
# WHEELS=source (default) compiles the wheel in the build stage;
# WHEELS=context takes prebuilt Debian 12 / CPython 3.11 wheels from
#   dist/image-wheels/ in the build context (`make image` builds them on the
#   host with pip wheel, reusing its build directory: minutes on a small
#   builder). Either way the runtime stage gets only the installed package:
#   no compiler, no wheel, no pip.
# WHEELS selects inside the build stage's RUN steps, not through a stage
# named after it (FROM wheels-${WHEELS}): podman 4.3 (Debian 12's) does not
# take a stage name made from an ARG's default for a stage, so the plain
# `podman build -t ssdfeed .` went looking for an image "wheels-source".
ARG BASE=docker.io/library/debian:bookworm-slim@sha256:3783cc01769c7b2b1b83a5c5ad96c815348e28ed7da68e2e3687004faa906251

FROM ${BASE} AS build
ARG WHEELS=source
RUN case "$WHEELS" in \
      source) pkgs="build-essential cmake ninja-build pkg-config python3-dev \
                    libturbojpeg0-dev libspng-dev libopencv-imgproc-dev liburing-dev libxxhash-dev libarchive-dev libzstd-dev \
                    libcli11-dev nlohmann-json3-dev prometheus-cpp-dev libcurl4-openssl-dev libssl-dev" ;; \
      context) pkgs="" ;; \
      *) echo "WHEELS=$WHEELS: use source or context" >&2; exit 2 ;; \
    esac \
 && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      ca-certificates python3 python3-venv $pkgs >/dev/null \
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
# /opt/build: pip and the build backend, never copied out. /opt/ssdfeed: the
# venv the runtime stage gets, made without pip (pip --python installs into
# it from outside); the same Debian python3 is at the same path in both
# stages, so the venv's links and script headers hold there.
RUN python3 -m venv /opt/build \
 && if [ "$WHEELS" = source ]; then \
      /opt/build/bin/pip install -q "scikit-build-core>=0.10" "nanobind>=2.0" \
      && rm -rf build dist \
      && CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) /opt/build/bin/pip wheel -q --no-build-isolation --no-deps -w /wheels . ; \
    else \
      mkdir /wheels && cp dist/image-wheels/ssdfeed-*.whl /wheels/ ; \
    fi \
 && python3 -m venv --without-pip --system-site-packages /opt/ssdfeed \
 && /opt/build/bin/pip --python /opt/ssdfeed/bin/python install -q --no-index --no-deps --no-cache-dir /wheels/ssdfeed-*.whl

FROM ${BASE}
# Runtime libraries only (no compilers, no -dev packages, no pip or
# python3-venv). numpy comes from Debian.
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      ca-certificates python3 python3-numpy \
      libturbojpeg0 libspng0 libopencv-imgproc406 libopencv-core406 liburing2 libxxhash0 libarchive13 libzstd1 \
      libprometheus-cpp-core1.0 libprometheus-cpp-pull1.0 libcurl4 libssl3 >/dev/null \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*
COPY --from=build /opt/ssdfeed/ /opt/ssdfeed/
# The build fails if the package does not load here or pip came along.
RUN /opt/ssdfeed/bin/ssdfeed --version \
 && /opt/ssdfeed/bin/python -c 'import ssdfeed' \
 && ! /opt/ssdfeed/bin/python -c 'import pip' 2>/dev/null \
 && ! ls /opt/ssdfeed/bin/pip* 2>/dev/null
# uid/gid 10001 is the image's default user (the node DaemonSet's in
# deploy/kubernetes); teams run it as their own uid/gid. Any --user UID:GID
# works on a mounted cache directory that user owns (or shares with
# --group-shared); the image's own /var/cache/ssdfeed is 0700 because the
# cache refuses a root others may write to.
# No VOLUME at /var/cache/ssdfeed: buildah 1.28 (Debian 12's) mounted the
# image's declared VOLUME, a copy of this 0700 directory of uid 10001, over
# the host directory given with -v at the same path in about one run in
# four, and that container's warm-up failed with "lstat
# /var/cache/ssdfeed/entries: Permission denied". The host's SSD is always
# mounted there; without a mount the cache is the container's own layer,
# which `ssdfeed doctor` flags.
RUN groupadd --gid 10001 ssdfeed \
 && useradd --uid 10001 --gid 10001 --home-dir /home/ssdfeed --create-home --shell /usr/sbin/nologin ssdfeed \
 && mkdir -p /var/cache/ssdfeed && chown 10001:10001 /var/cache/ssdfeed && chmod 0700 /var/cache/ssdfeed
ENV PATH=/opt/ssdfeed/bin:$PATH \
    SSDFEED_CACHE=/var/cache/ssdfeed \
    PYTHONDONTWRITEBYTECODE=1
USER 10001:10001
WORKDIR /home/ssdfeed
ENTRYPOINT ["ssdfeed"]
CMD ["--help"]
