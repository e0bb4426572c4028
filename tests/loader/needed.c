/* A host object linked against libc (DT_NEEDED), which the loader refuses. */
#include <stdio.h>

int say(void)
{
	return puts("hello");
}
