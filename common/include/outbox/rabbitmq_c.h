#pragma once
#include "outbox/cxx20.h"  // first: a pre-C++20 compiler stops here, saying why

// rabbitmq-c's headers under either layout: rabbitmq-c/ since 0.12 (Debian 13 ships
// 0.15, where the old top-level names still exist but warn), top level in 0.11
// (Debian 12). Include this instead of <amqp.h> and its siblings.

#if __has_include(<rabbitmq-c/amqp.h>)
#include <rabbitmq-c/amqp.h>
#include <rabbitmq-c/framing.h>
#include <rabbitmq-c/ssl_socket.h>
#include <rabbitmq-c/tcp_socket.h>
#else
#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#endif
