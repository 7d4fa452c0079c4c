/* SPDX-License-Identifier: MIT */
/* httpstatus: see httpstatus.h. */
#include "config.h"

#include <stddef.h>

#include "common/httpstatus.h"

static const struct {
	short code;
	const char *text;
} phrases[] = {
	{100, "Continue"},
	{200, "OK"},
	{204, "No Content"},
	{206, "Partial Content"},
	{301, "Moved Permanently"},
	{302, "Found"},
	{307, "Temporary Redirect"},
	{400, "Bad Request"},
	{401, "Unauthorized"},
	{403, "Forbidden"},
	{404, "Not Found"},
	{405, "Method Not Allowed"},
	{409, "Conflict"},
	{412, "Precondition Failed"},
	{413, "Payload Too Large"},
	{415, "Unsupported Media Type"},
	{416, "Range Not Satisfiable"},
	{422, "Unprocessable Entity"},
	{429, "Too Many Requests"},
	{500, "Internal Server Error"},
	{502, "Bad Gateway"},
	{503, "Service Unavailable"},
};

const char *http_status_text(long status)
{
	size_t i;

	for (i = 0; i < sizeof(phrases) / sizeof(phrases[0]); i++)
		if (phrases[i].code == status)
			return phrases[i].text;
	return "";
}
