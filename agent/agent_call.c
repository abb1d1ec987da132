/*
 * radium-agent-call-native: bin/radium-agent-call in C (docs/agent-protocol.md, section 2).
 *
 * The same program, command line, exit statuses and messages as the Python client; it starts
 * in about 1 ms instead of 10, and a leased container start runs it three or four times. It is
 * built beside the fronts where a C compiler is (radium.agent.nativeclient); elsewhere
 * the fronts and the agent use the Python client. tests/agent/test_agent_call.py runs the one
 * suite against both.
 *
 *   radium-agent-call-native --config CONFIG create BUNDLE | delete ID
 *   radium-agent-call-native --socket SOCKET prestart|poststop [-- FALLBACK...]
 *
 * Exit status: 0 done; 3 not this agent's to do (the caller takes the full Python path);
 * 1 failed (one line on stderr); 2 a bad command line. A hook whose agent cannot be reached
 * execs FALLBACK (the full hook) with the same state on its stdin.
 *
 * It runs as root on every Radium container start; its input is the engine's command line and
 * the runtime's OCI state, never the container's. Every buffer is bounded.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "agent_call.h"

/* radium.agentprotocol is the reference; a test keeps these equal to it. */
#define RENDEZVOUS_DIR "/run/radium/agents"
#define MAX_STATE (1 << 20)
#define MAX_REPLY 65536
#define CALL_TIMEOUT_SECONDS 30
#define REPLY_OK "ok\n"
#define REPLY_PASS "pass\n"
#define REPLY_ERROR "error "

static const char PROGRAM[] = "radium-agent-call";

/* Which source this was built from (radium.agent.nativeclient passes it): a client that
 * an older installation built speaks that installation's protocol, so the agent finds this
 * mark in the file before it puts the client in a spec, and rebuilds the client without it. */
#ifndef RADIUM_SOURCE_MARK
#define RADIUM_SOURCE_MARK "radium-agent-call source unknown"
#endif
__attribute__((used)) static const char SOURCE_MARK[] = RADIUM_SOURCE_MARK;

int fail(int status, const char *format, ...)
{
    va_list args;
    fprintf(stderr, "%s: ", PROGRAM);
    va_start(args, format);
    vfprintf(stderr, format, args);
    va_end(args);
    fputc('\n', stderr);
    return status;
}

/* The file name of the link to the agent of CONFIG: '%' and '/' quoted (rendezvous_name). */
static char *rendezvous_link(const char *config)
{
    size_t size = sizeof(RENDEZVOUS_DIR) + 1 + 3 * strlen(config);
    char *link = malloc(size), *out;
    if (link == NULL)
        return NULL;
    out = link + sprintf(link, "%s/", RENDEZVOUS_DIR);
    for (const char *in = config; *in; in++) {
        if (*in == '%' || *in == '/')
            out += sprintf(out, "%%%s", *in == '%' ? "25" : "2F");
        else
            *out++ = *in;
    }
    *out = '\0';
    return link;
}

/* The target of a symbolic link, or NULL. */
static char *read_link(const char *path)
{
    char target[4096];
    ssize_t length = readlink(path, target, sizeof(target) - 1);
    if (length < 0)
        return NULL;
    target[length] = '\0';
    return strdup(target);
}

/* ARGUMENT made absolute against the working directory (the agent normalises it). */
static char *absolute(const char *argument)
{
    char cwd[4096];
    char *path;
    if (argument[0] == '/')
        return strdup(argument);
    if (getcwd(cwd, sizeof(cwd)) == NULL)
        return NULL;
    if (asprintf(&path, "%s/%s", cwd, argument) < 0)
        return NULL;
    return path;
}

/* Everything on stdin, up to one byte past MAX_STATE (the agent refuses what is longer). */
static char *read_state(size_t *length)
{
    char *state = malloc(MAX_STATE + 1);
    ssize_t got;
    *length = 0;
    if (state == NULL)
        return NULL;
    while (*length < MAX_STATE + 1) {
        got = read(0, state + *length, MAX_STATE + 1 - *length);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        *length += (size_t)got;
    }
    return state;
}

/* One request on the socket at PATH, the reply into REPLY; -1 with errno set when it failed. */
static int call(const char *path, const char *request, size_t length, int timeout_seconds,
                char *reply, size_t *reply_length)
{
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    struct timeval timeout = {.tv_sec = timeout_seconds};
    int sock, saved;
    ssize_t done;

    *reply_length = 0;
    if (strlen(path) >= sizeof(address.sun_path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(address.sun_path, path);
    sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (sock < 0)
        return -1;
    if (timeout_seconds > 0 &&
        (setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)) < 0 ||
         setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout)) < 0))
        goto failed;
    if (connect(sock, (struct sockaddr *)&address, sizeof(address)) < 0)
        goto failed;
    while (length > 0) {
        done = send(sock, request, length, MSG_NOSIGNAL);
        if (done < 0 && errno == EINTR)
            continue;
        if (done < 0)
            goto failed;
        request += done;
        length -= (size_t)done;
    }
    if (shutdown(sock, SHUT_WR) < 0)
        goto failed;
    while (*reply_length < MAX_REPLY &&
           (*reply_length == 0 || reply[*reply_length - 1] != '\n')) {
        done = recv(sock, reply + *reply_length, MAX_REPLY - *reply_length, 0);
        if (done < 0 && errno == EINTR)
            continue;
        if (done < 0)
            goto failed;
        if (done == 0)
            break;
        *reply_length += (size_t)done;
    }
    close(sock);
    return 0;
failed:
    saved = errno;
    close(sock);
    errno = saved;
    return -1;
}

/* Exec the full hook with STATE on its stdin (a memfd: it may exceed a pipe's buffer). */
static int fallback(char **command, const char *state, size_t length)
{
    int fd = memfd_create("oci-state", MFD_CLOEXEC);
    size_t written = 0;
    ssize_t done;
    if (fd < 0)
        return fail(FAILED, "cannot hold the state for %s: %s", command[0], strerror(errno));
    while (written < length) {
        done = write(fd, state + written, length - written);
        if (done < 0 && errno == EINTR)
            continue;
        if (done < 0)
            return fail(FAILED, "cannot hold the state for %s: %s", command[0], strerror(errno));
        written += (size_t)done;
    }
    if (lseek(fd, 0, SEEK_SET) < 0 || dup2(fd, 0) < 0)
        return fail(FAILED, "cannot pass the state to %s: %s", command[0], strerror(errno));
    execv(command[0], command);
    return fail(FAILED, "cannot run %s: %s", command[0], strerror(errno));
}

/* The reply as Python's repr would show its start: b'...' with what is not printable escaped. */
static void print_reply(const char *reply, size_t length)
{
    fputs("b'", stderr);
    for (size_t i = 0; i < length && i < 80; i++) {
        unsigned char c = (unsigned char)reply[i];
        if (c == '\n')
            fputs("\\n", stderr);
        else if (c == '\'' || c == '\\')
            fprintf(stderr, "\\%c", c);
        else if (c >= 0x20 && c < 0x7f)
            fputc(c, stderr);
        else
            fprintf(stderr, "\\x%02x", c);
    }
    fputs("'\n", stderr);
}

static int answer(const char *path, char *reply, size_t length)
{
    size_t start = sizeof(REPLY_ERROR) - 1, end = length;
    if (length == strlen(REPLY_OK) && memcmp(reply, REPLY_OK, length) == 0)
        return DONE;
    if (length == strlen(REPLY_PASS) && memcmp(reply, REPLY_PASS, length) == 0)
        return PASS;
    if (length >= start && memcmp(reply, REPLY_ERROR, start) == 0) {
        while (start < end && (reply[start] == ' ' || reply[start] == '\t'))
            start++;
        while (end > start && (reply[end - 1] == '\n' || reply[end - 1] == ' ' ||
                               reply[end - 1] == '\t' || reply[end - 1] == '\r'))
            end--;
        return fail(FAILED, "%.*s", (int)(end - start), reply + start);
    }
    fprintf(stderr, "%s: node agent at %s answered ", PROGRAM, path);
    print_reply(reply, length);
    return FAILED;
}

/* create BUNDLE or delete ID for the agent of CONFIG: PASS when no agent runs with it. */
int runtime_call(const char *config, const char *op, const char *argument)
{
    static char reply[MAX_REPLY];
    char *link, *path, *field, *request;
    size_t reply_length;
    int length;

    if (config[0] != '/')
        return PASS;
    link = rendezvous_link(config);
    path = link ? read_link(link) : NULL;
    if (path == NULL)
        return PASS; /* no agent runs with this config */
    field = strcmp(op, "create") == 0 ? absolute(argument) : strdup(argument);
    if (field == NULL)
        return PASS;
    length = asprintf(&request, "%s%c%s%c%s", op, '\0', config, '\0', field);
    if (length < 0)
        return PASS;
    if (call(path, request, (size_t)length, CALL_TIMEOUT_SECONDS, reply, &reply_length) < 0)
        return PASS;
    return answer(path, reply, reply_length);
}

/* A hook's STAGE with the OCI state from stdin; COMMAND (NULL-ended) is its fallback. */
static int hook_call(const char *path, const char *stage, char **command)
{
    static char reply[MAX_REPLY];
    size_t stage_length = strlen(stage), state_length, reply_length;
    char *request = malloc(stage_length + 1 + MAX_STATE + 1), *state;
    if (request == NULL || (state = read_state(&state_length)) == NULL)
        return fail(FAILED, "out of memory");
    memcpy(request, stage, stage_length + 1); /* the stage, then its NUL separator */
    memcpy(request + stage_length + 1, state, state_length);
    /* No timeout: the engine bounds the hook (its spec entry), and an allocation may wait. */
    if (call(path, request, stage_length + 1 + state_length, 0, reply, &reply_length) < 0) {
        int error = errno;
        if (command[0] != NULL)
            return fallback(command, state, state_length);
        return fail(FAILED, "node agent at %s: %s; is 'radium agent' running?", path,
                    strerror(error));
    }
    return answer(path, reply, reply_length);
}

int main(int argc, char **argv)
{
    const char *how, *where, *op, *name = strrchr(argv[0], '/');
    if (strcmp(name != NULL ? name + 1 : argv[0], FRONT_NAME) == 0)
        return front_main(argc, argv);
    if (argc < 4 || (strcmp(argv[1], "--config") != 0 && strcmp(argv[1], "--socket") != 0))
        return fail(USAGE, "usage: radium-agent-call (--config CONFIG | --socket SOCKET) OP ...");
    how = argv[1], where = argv[2], op = argv[3];
    if (strcmp(how, "--config") == 0) {
        if ((strcmp(op, "create") != 0 && strcmp(op, "delete") != 0) || argc != 5)
            return fail(USAGE, "--config takes create or delete and one argument");
        return runtime_call(where, op, argv[4]);
    }
    if (strcmp(op, "prestart") != 0 && strcmp(op, "poststop") != 0)
        return fail(USAGE, "--socket takes prestart or poststop");
    if (argc > 4 && strcmp(argv[4], "--") == 0)
        return hook_call(where, op, argv + 5);
    return hook_call(where, op, argv + argc); /* argv[argc] is NULL: no fallback */
}
