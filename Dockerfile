# gpusched's daemon image: the one binary of every daemon (scheduler, extender, agent, webhook) and the cluster
# commands (status, top, why). The lab tools (simulate, interference, monitor) are gpusched-lab, in Dockerfile.lab.
# Build with `make image` (scripts/build-image.sh picks docker, podman or buildah). Two stages: the first builds a
# release binary from Debian bookworm's packages; the second is debian:bookworm-slim with only the shared libraries
# that binary links (scripts/check-image-deps.py keeps the list below exact) and the install tree (bin, docs,
# deploy manifests). NVML is not in the image: the agent dlopens libnvidia-ml.so.1, which the NVIDIA container
# runtime mounts into GPU pods.

FROM debian:bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends \
      cmake ninja-build pkg-config g++ \
      libcairo2-dev libcli11-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libsimdjson-dev \
      libcurl4-openssl-dev libssl-dev libcpp-httplib-dev libyaml-cpp-dev prometheus-cpp-dev libboost1.81-dev \
      libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc libxgboost-dev libeigen3-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -G Ninja -DCMAKE_BUILD_TYPE=Release \
      -DGPUSCHED_BUILD_TESTS=OFF -DGPUSCHED_BUILD_BENCHMARKS=OFF \
    && cmake --build /build --target gpusched \
    && DESTDIR=/stage cmake --install /build --prefix /usr/local --strip --component daemons

FROM debian:bookworm-slim
# The runtime list: one package per library the binary links (besides libc6, libgcc-s1 and libstdc++6, which the
# base image has), then ca-certificates (HTTPS to Prometheus, InfluxDB and API servers outside the cluster).
RUN apt-get update && apt-get install -y --no-install-recommends \
      libabsl20220623 libcurl4 libfmt9 libgrpc++1.51 libgrpc29 libprometheus-cpp-core1.0 libprotobuf32 \
      libsimdjson14 libspdlog1.10 libssl3 libyaml-cpp0.7 \
      ca-certificates \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /stage/usr/local /usr/local
# Not root by default; the agent's DaemonSet runs it as root (device plugin sockets, /dev/nvidia*).
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/gpusched"]
CMD ["--help"]
