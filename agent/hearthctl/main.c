/* hearthctl: host-side client for hearth's control protocol (see ctl.h
 * for how its files divide the work). main reads the options, finds the
 * command, builds its params, connects, calls and prints. */
#include "ctl.h"
#include "fleet.h"

#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"connect", required_argument, NULL, 'c'}, {"json", no_argument, NULL, 'j'},
        {"timeout", required_argument, NULL, 't'}, {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},       {"timeout-ms", required_argument, NULL, 't'},
        {NULL, 0, NULL, 0},
    };
    const char *spec = getenv("HEARTH_CONNECT");
    const struct cmd *cmd;
    struct ctl t;
    cJSON *params = NULL, *reply = NULL;
    const cJSON *result = NULL;
    unsigned long long ms;
    int o, words, rc;
    struct fleet fleet = {0}; /* the --connect targets */
    bool timeout_set = false;

    memset(&t, 0, sizeof(t));
    t.timeout_ms = DEFAULT_TIMEOUT_MS;
    t.notes_tail = &t.notes;
    t.conn.fd = -1;
    if (!spec || !*spec)
        spec = PROTO_DEFAULT_CONNECT;
    /* "+": options end at COMMAND, whose own options (-n, -f) follow it. */
    opterr = 0; /* our own messages, named "hearthctl" whatever argv[0] is */
    while ((o = getopt_long(argc, argv, "+:c:jt:hV", opts, NULL)) != -1) {
        switch (o) {
        case 'c':
            if (fleet_add(&fleet, optarg) != 0) {
                fleet_free(&fleet);
                return EXIT_USAGE;
            }
            break;
        case 'j':
            t.json = true;
            break;
        case 't':
            if (!conn_parse_ulong(optarg, INT_MAX, &ms)) {
                fprintf(stderr, "hearthctl: bad --timeout '%s' (milliseconds)\n", optarg);
                return EXIT_USAGE;
            }
            t.timeout_ms = (int)ms;
            timeout_set = true;
            break;
        case 'h':
            commands_usage(stdout);
            return print_flush_stdout();
        case 'V':
            puts("hearthctl " HEARTH_VERSION);
            return print_flush_stdout();
        default:
            /* A long option is the word just read; a short one is optopt. */
            if (optind > 0 && optind <= argc && argv[optind - 1] &&
                strncmp(argv[optind - 1], "--", 2) == 0)
                fprintf(stderr, "hearthctl: option '%.*s' %s\n",
                        (int)strcspn(argv[optind - 1], "="), argv[optind - 1],
                        o == ':' ? "needs a value" : "is unknown or takes no value");
            else
                fprintf(stderr, "hearthctl: option '-%c' %s\n", optopt,
                        o == ':' ? "needs a value" : "is unknown");
            commands_usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        commands_usage(stderr);
        return EXIT_USAGE;
    }
    cmd = commands_find(argc - optind, argv + optind, &words);
    if (!cmd) {
        fprintf(stderr, "hearthctl: unknown command '%s'\n", argv[optind]);
        commands_usage(stderr);
        return EXIT_USAGE;
    }
    t.cmd = cmd;
    t.method = cmd->method;
    argc -= optind + words;
    argv += optind + words;
    if (fleet.n == 0 && fleet_add(&fleet, spec) != 0)
        return EXIT_USAGE;
    spec = fleet.t[0].spec;
    if (cmd->fleet) {
        rc = cmd->fleet(&fleet, timeout_set ? t.timeout_ms : -1, t.json, argc, argv);
        fleet_free(&fleet);
        if (print_flush_stdout() != 0 && rc == 0)
            rc = EXIT_USAGE;
        return rc;
    }
    if (fleet.multi && cmd->run) {
        fprintf(stderr, "hearthctl: %s works on one sandbox: give one --connect\n", cmd->name);
        return EXIT_USAGE;
    }
    if (cmd->run) {
        rc = cmd->build ? cmd->build(&t, argc, argv, &params) : 0;
        cJSON_Delete(params);
        if (rc != 0)
            return rc;
        rc = conn_open(&t.conn, spec, t.timeout_ms);
        if (rc == 0)
            rc = cmd->run(&t, argc, argv);
        conn_close(&t.conn);
        fleet_free(&fleet);
        if (print_flush_stdout() != 0 && rc == 0)
            rc = EXIT_USAGE;
        return rc;
    }
    if (cmd->build) {
        rc = cmd->build(&t, argc, argv, &params);
        if (rc != 0)
            return rc;
    } else if (argc > 0) {
        return base_usage_err(&t, "unexpected argument '%s'", argv[0]);
    } else {
        params = base_new_object();
    }
    if (fleet.multi)
        return fleet_run_one(&t, &fleet, params);
    rc = conn_open(&t.conn, spec, t.timeout_ms);
    if (rc != 0) {
        cJSON_Delete(params);
        fleet_free(&fleet);
        return rc;
    }
    rc = call_method(&t, params, &reply, &result);
    if (rc == 0) {
        if ((t.json && cmd->print != print_metrics) || !cmd->print)
            rc = print_json(result, true);
        else
            rc = cmd->print(&t, result);
        cJSON_Delete(reply);
        if (rc == 0)
            rc = print_flush_stdout();
        if (rc == 0 && t.follow && cmd->notify)
            rc = call_follow(&t);
    }
    call_notes_free(&t);
    conn_close(&t.conn);
    fleet_free(&fleet); /* t.conn.spec was its first target */
    if (print_flush_stdout() != 0 && rc == 0)
        rc = EXIT_USAGE;
    return rc;
}

