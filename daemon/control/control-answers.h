/* SPDX-License-Identifier: MIT */
/*
 * The control socket's snapshot answers (control-answers.c): status,
 * clients, sessions and counters, as text tables or one JSON document,
 * appended to @out. A JSON answer is cut at cfg->max_answer bytes, and
 * says what it left out.
 */
#ifndef RDMACM_MUX_CONTROL_ANSWERS_H
#define RDMACM_MUX_CONTROL_ANSWERS_H

#include <glib.h>
#include <stdbool.h>

#include "control.h"

void control_answer_status(Relay *relay, const ControlConfig *cfg, const ControlStats *stats,
			   GString *out, bool json);
void control_answer_clients(Relay *relay, const ControlConfig *cfg, GString *out, bool json);
void control_answer_sessions(Relay *relay, const ControlConfig *cfg, GString *out, bool json);
void control_answer_counters(Relay *relay, GString *out, bool json);

#endif
