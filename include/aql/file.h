/* SPDX-License-Identifier: MIT */
#ifndef AQL_FILE_H
#define AQL_FILE_H
#endif
