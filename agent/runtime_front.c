/*
 * radium-front-native: the shell fronts bin/radium-runtime and bin/containerd-shim-radium-v2 in
 * C (docs/runtime-front.md), the same rule to the letter. The shell front execs it first thing
 * where it was built (it is radium-agent-call-native under a second name); it saves each call
 * the two greps (about 2 ms each here) and, for a Radium container, the agent client's own
 * start. tests/shim/test_fronts.py runs its table against both fronts.
 *
 *   radium-front-native runtime|shim FRONT FULL ARGS...
 *
 * FRONT is the shell front's own path (a program found in PATH that is the same file is never
 * run), FULL the Python program beside it, ARGS the engine's. It never returns: it execs the
 * low-level program, or FULL with ARGS when in doubt. Like the shell front it reads nothing of
 * the container but config.json, and only searches it for two strings.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_call.h"

/* A config.json larger than this goes to Python (engines write a few KiB). */
#define MAX_SPEC (64 << 20)
#define MAX_CONFIG (1 << 20)

enum grep { FOUND, ABSENT, UNREADABLE };

static int is(const char *arg, const char *const *words)
{
    for (; *words; words++)
        if (strcmp(arg, *words) == 0)
            return 1;
    return 0;
}

static int starts(const char *arg, const char *const *prefixes)
{
    for (; *prefixes; prefixes++)
        if (strncmp(arg, *prefixes, strlen(*prefixes)) == 0)
            return 1;
    return 0;
}

/* The whole of PATH (at most LIMIT bytes, NUL-ended) into *DATA; its length, or -1. */
static ssize_t slurp(const char *path, size_t limit, char **data)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t size = 0, room = 65536;
    char *buffer = NULL, *grown;
    ssize_t got;
    if (fd < 0)
        return -1;
    for (;;) {
        if ((grown = realloc(buffer, room + 1)) == NULL)
            break;
        buffer = grown;
        got = read(fd, buffer + size, room - size);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0)
            break;
        if (got == 0) {
            close(fd);
            buffer[size] = '\0';
            *data = buffer;
            return (ssize_t)size;
        }
        size += (size_t)got;
        if (size == room) {
            if (room >= limit)
                break;
            room *= 2;
        }
    }
    close(fd);
    free(buffer);
    return -1;
}

/* grep -qF -e RADIUM_ -e radium.io/ BUNDLE/config.json */
static enum grep asks_radium(const char *bundle)
{
    char *path, *spec;
    ssize_t length;
    enum grep found;
    if (asprintf(&path, "%s/config.json", bundle) < 0)
        return UNREADABLE;
    length = slurp(path, MAX_SPEC, &spec);
    free(path);
    if (length < 0)
        return UNREADABLE;
    found = memmem(spec, (size_t)length, "RADIUM_", 7) || memmem(spec, (size_t)length,
                                                                 "radium.io/", 10)
                ? FOUND
                : ABSENT;
    free(spec);
    return found;
}

/* grep -q '^[^#]*WORD' CONFIG: a line that names WORD before any '#'. */
static enum grep configures(const char *config, const char *word)
{
    char *text, *line, *end, *hash, *at;
    ssize_t length = slurp(config, MAX_CONFIG, &text);
    enum grep found = ABSENT;
    if (length < 0 || memchr(text, '\0', (size_t)length) != NULL) {
        if (length >= 0)
            free(text);
        return UNREADABLE; /* grep calls a file with NUL bytes binary: Python decides */
    }
    for (line = text; line < text + length; line = end + 1) {
        if ((end = strchr(line, '\n')) == NULL)
            end = text + length;
        *end = '\0';
        at = strstr(line, word);
        hash = strchr(line, '#');
        if (at != NULL && (hash == NULL || hash > at)) {
            found = FOUND;
            break;
        }
    }
    free(text);
    return found;
}

/* The agent of CONFIG did OP on ARGUMENT (its client's exit status 0); silent, as the shell
 * front's call is (2>/dev/null): a failure is the Python program's to report. */
static int agent_did(const char *config, const char *op, const char *argument)
{
    const char *debug = getenv("RADIUM_DEBUG");
    int saved, quiet, status;
    if (debug != NULL && debug[0] != '\0')
        return 0;
    saved = fcntl(2, F_DUPFD_CLOEXEC, 3);
    quiet = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (saved >= 0 && quiet >= 0)
        dup2(quiet, 2);
    status = runtime_call(config, op, argument);
    if (saved >= 0) {
        dup2(saved, 2);
        close(saved);
    }
    if (quiet >= 0)
        close(quiet);
    return status == 0;
}

/* exec NAME's first match in PATH that is a regular executable file and not FRONT; returns
 * only if there is none. */
static void exec_in_path(const char *name, const char *front, char **args)
{
    const char *path = getenv("PATH");
    char *dirs, *dir, *next, *program;
    struct stat self, found;
    int have_self = stat(front, &self) == 0;
    dirs = strdup(path != NULL && path[0] != '\0' ? path : "/bin:/usr/bin");
    for (dir = dirs; dir != NULL; dir = next) {
        if ((next = strchr(dir, ':')) != NULL)
            *next++ = '\0';
        if (dir[0] == '\0' || asprintf(&program, "%s/%s", dir, name) < 0)
            continue;
        if (stat(program, &found) == 0 && S_ISREG(found.st_mode) && access(program, X_OK) == 0
            && !(have_self && found.st_dev == self.st_dev && found.st_ino == self.st_ino)) {
            args[0] = program;
            execv(program, args);
        }
        free(program);
    }
    free(dirs);
}

/* ${bundle:-.} */
static const char *or_here(const char *bundle)
{
    return bundle != NULL && bundle[0] != '\0' ? bundle : ".";
}

static const char *config_file(void)
{
    const char *config = getenv("RADIUM_CONFIG");
    return config != NULL && config[0] != '\0' ? config : "/etc/radium/config.toml";
}

/* The bundle's spec asks for Radium: 1 yes, 0 no, -1 it cannot be read (Python decides). */
static int bundle_asks(const char *bundle)
{
    switch (asks_radium(or_here(bundle))) {
    case FOUND: return 1;
    case ABSENT: return 0;
    default: return -1;
    }
}

/* CONFIG exists and may name low-level programs of its own (WORD): Python decides. */
static int configured(const char *config, const char *word)
{
    struct stat st;
    return stat(config, &st) == 0 && configures(config, word) != ABSENT;
}

/* ARGS[0] is free for the program's name; ARGS[1..] the engine's arguments. */
static void runtime_front(const char *front, char **args)
{
    static const char *const valued[] = {"--root", "-root", "--log", "-log", "--log-format",
        "-log-format", "--criu", "-criu", "--rootless", "-rootless", NULL};
    static const char *const with_value[] = {"--root=", "-root=", "--log=", "-log=",
        "--log-format=", "-log-format=", "--criu=", "-criu=", "--rootless=", "-rootless=", NULL};
    static const char *const switches[] = {"--debug", "-debug", "--systemd-cgroup",
        "-systemd-cgroup", NULL};
    static const char *const bundle_flags[] = {"--bundle", "-bundle", "--b", "-b", NULL};
    static const char *const bundle_with[] = {"--bundle=", "-bundle=", "--b=", "-b=", NULL};
    static const char *const create_valued[] = {"--console-socket", "-console-socket",
        "--pid-file", "-pid-file", "--preserve-fds", "-preserve-fds", NULL};
    const char *command = NULL, *bundle = NULL, *config = config_file();
    int skip = 0, radium = 0; /* skip: 1 a value, 2 the bundle */

    for (char **arg = args + 1; *arg; arg++) {
        if (skip) {
            if (skip == 2)
                bundle = *arg;
            skip = 0;
            continue;
        }
        if (command == NULL) {
            if (is(*arg, valued))
                skip = 1;
            else if (starts(*arg, with_value) || is(*arg, switches))
                ;
            else if ((*arg)[0] == '-')
                return;
            else
                command = *arg;
            continue;
        }
        if (strcmp(command, "create") != 0 && strcmp(command, "run") != 0)
            break;
        if (is(*arg, bundle_flags))
            skip = 2;
        else if (starts(*arg, bundle_with))
            bundle = strchr(*arg, '=') + 1;
        else if (is(*arg, create_valued))
            skip = 1;
        else if (strncmp(*arg, "---", 3) == 0)
            return;
        else if (strcmp(*arg, "--") == 0)
            break;
    }
    if (command == NULL)
        return;
    if ((strcmp(command, "create") == 0 || strcmp(command, "run") == 0)
        && (radium = bundle_asks(bundle)) < 0)
        return;
    if (configured(config, "runtimes"))
        return;
    if (radium && !agent_did(config, "create", or_here(bundle)))
        return;
    exec_in_path("runc", front, args);
    exec_in_path("crun", front, args);
}

static void shim_front(const char *front, char **args)
{
    static const char *const valued[] = {"-namespace", "--namespace", "-address", "--address",
        "-publish-binary", "--publish-binary", "-socket", "--socket", NULL};
    static const char *const with_value[] = {"-namespace=", "--namespace=", "-address=",
        "--address=", "-publish-binary=", "--publish-binary=", "-socket=", "--socket=", NULL};
    static const char *const switches[] = {"-debug", "--debug", NULL};
    const char *action = NULL, *bundle = NULL, *id = NULL, *config = config_file();
    int skip = 0, radium = 0; /* skip: 1 a value, 2 the bundle, 3 the id */

    for (char **arg = args + 1; *arg; arg++) {
        if (skip) {
            if (skip == 2)
                bundle = *arg;
            else if (skip == 3)
                id = *arg;
            skip = 0;
            continue;
        }
        if (strcmp(*arg, "-bundle") == 0 || strcmp(*arg, "--bundle") == 0)
            skip = 2;
        else if (strncmp(*arg, "-bundle=", 8) == 0 || strncmp(*arg, "--bundle=", 9) == 0)
            bundle = strchr(*arg, '=') + 1;
        else if (strcmp(*arg, "-id") == 0 || strcmp(*arg, "--id") == 0)
            skip = 3;
        else if (strncmp(*arg, "-id=", 4) == 0 || strncmp(*arg, "--id=", 5) == 0)
            id = strchr(*arg, '=') + 1;
        else if (is(*arg, valued))
            skip = 1;
        else if (starts(*arg, with_value) || is(*arg, switches))
            ;
        else if ((*arg)[0] == '-')
            return;
        else {
            action = *arg;
            break;
        }
    }
    if (action == NULL || (strcmp(action, "start") != 0 && strcmp(action, "delete") != 0))
        return;
    if ((radium = bundle_asks(bundle)) < 0 || configured(config, "runc_shim"))
        return;
    if (radium) {
        const char *what = strcmp(action, "start") == 0 ? or_here(bundle) : id;
        if (what == NULL || what[0] == '\0'
            || !agent_did(config, strcmp(action, "start") == 0 ? "create" : "delete", what))
            return;
    }
    exec_in_path("containerd-shim-runc-v2", front, args);
}

int front_main(int argc, char **argv)
{
    /* argv: radium-front-native runtime|shim FRONT FULL ARGS... */
    char **args;
    if (argc < 4)
        return fail(USAGE, "usage: radium-front-native runtime|shim FRONT FULL ARGS...");
    args = argv + 3; /* args[0] (FULL) is replaced by the program's path before an exec */
    if (strcmp(argv[1], "runtime") == 0)
        runtime_front(argv[2], args);
    else if (strcmp(argv[1], "shim") == 0)
        shim_front(argv[2], args);
    args[0] = argv[3];
    execv(argv[3], args);
    return fail(FAILED, "cannot run %s: %s", argv[3], strerror(errno));
}
