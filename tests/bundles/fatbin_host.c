/* SPDX-License-Identifier: MIT */
/* A host program; the build adds a .hip_fatbin section to it. */
int main(void)
{
	return 0;
}
