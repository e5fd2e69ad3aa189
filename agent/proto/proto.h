/* proto: what the guest's control server and the host's client must agree
 * on, in one place: where the server listens by default and how long a
 * request line may be. Both sides include it; neither copies the numbers. */
#ifndef HEARTH_PROTO_H
#define HEARTH_PROTO_H

/* The listener a config without "control.listen" gets, and the client's
 * connect spec when neither --connect nor $HEARTH_CONNECT is given. */
#define PROTO_DEFAULT_CONNECT "unix:/run/hearth/control.sock"

/* The longest request line the server reads, without its newline. */
#define PROTO_MAX_REQUEST (1 << 20)

#endif
