# Stand-in for the official rabbitmq:3.10-management image, built from Debian 12's
# rabbitmq-server (3.10), for machines that cannot reach Docker Hub
# (deploy/docker/check-image.py). It implements what docker-compose.yml uses of the
# official image: docker-entrypoint.sh, RABBITMQ_DEFAULT_USER and _PASS, the management
# plugin, rabbitmq-diagnostics.
FROM debian:12-slim
RUN printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d \
 && apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends rabbitmq-server \
 && rm -rf /var/lib/apt/lists/* /usr/sbin/policy-rc.d \
 && rabbitmq-plugins enable --offline rabbitmq_management >/dev/null
COPY rabbitmq-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
EXPOSE 5672 15672
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["rabbitmq-server"]
