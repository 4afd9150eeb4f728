#!/bin/sh
# The official rabbitmq image's default user, as far as docker-compose.yml needs it: the
# user $RABBITMQ_DEFAULT_USER with the password $RABBITMQ_DEFAULT_PASS, created at the
# node's first start. Debian's rabbitmq-server switches to the rabbitmq user itself.
set -eu
if [ -n "${RABBITMQ_DEFAULT_USER:-}" ]; then
  umask 027
  printf 'default_user = %s\ndefault_pass = %s\n' "$RABBITMQ_DEFAULT_USER" "${RABBITMQ_DEFAULT_PASS:?}" \
    > /etc/rabbitmq/rabbitmq.conf
  chgrp rabbitmq /etc/rabbitmq/rabbitmq.conf
fi
exec "$@"
