/* SPDX-License-Identifier: MIT */
/*
 * errname: the table of errno names the file extension may send. Anything
 * outside it is sent as EIO.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "common/errname.h"

#define E(x)          \
	{             \
		x, #x \
	}
static const struct {
	int err;
	const char *name;
} errtab[] = {
	E(EPERM),	 E(ENOENT),	E(EIO),	      E(ENXIO),	  E(E2BIG),
	E(EBADF),	 E(EAGAIN),	E(ENOMEM),    E(EACCES),  E(EBUSY),
	E(EEXIST),	 E(EXDEV),	E(ENODEV),    E(ENOTDIR), E(EISDIR),
	E(EINVAL),	 E(ENFILE),	E(EMFILE),    E(ETXTBSY), E(EFBIG),
	E(ENOSPC),	 E(ESPIPE),	E(EROFS),     E(EMLINK),  E(ERANGE),
	E(ENAMETOOLONG), E(ENOSYS),	E(ENOTEMPTY), E(ELOOP),	  E(ENODATA),
	E(EOVERFLOW),	 E(EOPNOTSUPP), E(ETIMEDOUT), E(EDQUOT),  E(ESTALE),
	E(ECANCELED),	 E(EPROTO),	E(ENOTSUP),
};
#undef E

const char *errname_from_errno(int err)
{
	size_t i;

	for (i = 0; i < sizeof(errtab) / sizeof(errtab[0]); i++)
		if (errtab[i].err == err)
			return errtab[i].name;
	return NULL;
}

int errname_to_errno(const char *name)
{
	size_t i;

	if (name == NULL)
		return EIO;
	for (i = 0; i < sizeof(errtab) / sizeof(errtab[0]); i++)
		if (strcmp(errtab[i].name, name) == 0)
			return errtab[i].err;
	return EIO;
}
