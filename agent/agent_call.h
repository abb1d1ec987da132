/* What agent_call.c and runtime_front.c share: one program, radium-agent-call-native, which is also
 * radium-front-native (the same file under a second name: it runs as the front by that name). */
#ifndef RADIUM_AGENT_CALL_H
#define RADIUM_AGENT_CALL_H

#define FRONT_NAME "radium-front-native"

enum { DONE = 0, FAILED = 1, USAGE = 2, PASS = 3 };

/* One line "radium-agent-call: ..." on stderr; STATUS. */
int fail(int status, const char *format, ...) __attribute__((format(printf, 2, 3)));
/* create BUNDLE or delete ID for the agent of CONFIG (docs/agent-protocol.md, section 2). */
int runtime_call(const char *config, const char *op, const char *argument);
/* The front: radium-front-native runtime|shim FRONT FULL ARGS... (runtime_front.c). */
int front_main(int argc, char **argv);

#endif
