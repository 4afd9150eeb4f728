# Stand-in for the official postgres:15 image, built from Debian 12's postgresql-15, for
# machines that cannot reach Docker Hub (deploy/docker/check-image.py). It implements what
# docker-compose.yml uses of the official image: POSTGRES_DB, POSTGRES_USER,
# POSTGRES_PASSWORD_FILE, the data directory /var/lib/postgresql/data, pg_isready, psql.
FROM debian:12-slim
# No cluster at install (the entrypoint makes one in PGDATA); no service start in a build.
RUN printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d \
 && mkdir -p /etc/postgresql-common/createcluster.d \
 && echo 'create_main_cluster = false' > /etc/postgresql-common/createcluster.d/no-main-cluster.conf \
 && apt-get update -qq \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/* /usr/sbin/policy-rc.d
ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
EXPOSE 5432
STOPSIGNAL SIGINT
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["postgres"]
