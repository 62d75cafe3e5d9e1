# ssdfeed: the `ssdfeed` command and the Python package, run as a non-root
# user, with the node's cache SSD mounted on /var/cache/ssdfeed (-v).
#
#   ./dev wheel                      (the manylinux wheels, into dist/)
#   docker build -t ssdfeed .        (or podman build -t ssdfeed .)
#
# The image installs the binary wheel that `./dev wheel` writes into dist/
# (manylinux_2_31: every library the core uses is inside it): nothing is
# compiled here, and pip installs offline (--no-index) from the build
# context, so the build needs no package index. pip picks the wheel for the
# base's CPython (Debian 12: 3.11, the cp311 wheel).
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
ARG BASE=docker.io/library/debian:bookworm-slim@sha256:3783cc01769c7b2b1b83a5c5ad96c815348e28ed7da68e2e3687004faa906251

FROM ${BASE} AS build
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      python3 python3-venv >/dev/null \
 && rm -rf /var/lib/apt/lists/*
# Only the wheels from the build context (.dockerignore keeps the rest of
# dist/ and the source tree out).
COPY dist/ /wheels/
# /opt/build: pip, never copied out. /opt/ssdfeed: the venv the runtime stage
# gets, made without pip (pip --python installs into it from outside); the
# same Debian python3 is at the same path in both stages, so the venv's links
# and script headers hold there. numpy is Debian's (--system-site-packages).
RUN ls /wheels/ssdfeed-*-manylinux*.whl >/dev/null 2>&1 \
      || { echo "no ssdfeed manylinux wheel in dist/: ./dev wheel makes it" >&2; exit 1; } \
 && python3 -m venv /opt/build \
 && python3 -m venv --without-pip --system-site-packages /opt/ssdfeed \
 && /opt/build/bin/pip --python /opt/ssdfeed/bin/python install -q --no-index --no-deps --no-cache-dir \
      --only-binary=:all: --find-links /wheels ssdfeed

FROM ${BASE}
# No compiler, no -dev package, no pip or python3-venv: Python, numpy and the
# CA bundle (libcurl's, for s3:// and https:// sources) from Debian; every
# other library is in the wheel (site-packages/ssdfeed.libs).
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
      ca-certificates python3 python3-numpy >/dev/null \
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
