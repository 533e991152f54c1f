/*-------------------------------------------------------------------------
 *
 * regions.c
 *	  The eleven region codes of seed 003 and the distance table the
 *	  location strategy uses.
 *
 * Each region stands for one city; the distance between two regions is
 * the great-circle distance between their cities, in hundreds of
 * kilometres, rounded.  The README prints the same table.
 *
 *	  wnam  San Francisco     enam  Ashburn/New York   sam   Sao Paulo
 *	  weur  London            eeur  Warsaw             apac  Hong Kong
 *	  apac-ne  Tokyo          apac-se  Singapore       oc    Sydney
 *	  afr   Johannesburg      me    Dubai
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "cd_errcodes.h"
#include "placement/regions.h"

static const char *const region_codes[CD_REGION_COUNT] = {
	"wnam", "enam", "sam", "weur", "eeur", "apac",
	"apac-ne", "apac-se", "oc", "afr", "me"
};

/* hundreds of km, in the order of region_codes */
static const int16 region_distance[CD_REGION_COUNT][CD_REGION_COUNT] = {
	/* wnam enam sam weur eeur apac ne  se   oc  afr  me */
	{0, 41, 104, 86, 94, 111, 83, 136, 119, 169, 130},	/* wnam */
	{41, 0, 77, 56, 69, 130, 109, 154, 160, 129, 110},	/* enam */
	{104, 77, 0, 95, 104, 179, 185, 160, 134, 74, 122},	/* sam */
	{86, 56, 95, 0, 15, 96, 96, 109, 170, 91, 55},	/* weur */
	{94, 69, 104, 15, 0, 86, 86, 98, 158, 88, 41},	/* eeur */
	{111, 130, 179, 96, 86, 0, 29, 26, 74, 107, 59},	/* apac */
	{83, 109, 185, 96, 86, 29, 0, 53, 78, 135, 79},	/* apac-ne */
	{136, 154, 160, 109, 98, 26, 53, 0, 63, 87, 59},	/* apac-se */
	{119, 160, 134, 170, 158, 74, 78, 63, 0, 111, 121},	/* oc */
	{169, 129, 74, 91, 88, 107, 135, 87, 111, 0, 64},	/* afr */
	{130, 110, 122, 55, 41, 59, 79, 59, 121, 64, 0},	/* me */
};

/*
 * RegionIndex returns the index of a region code, -1 when it is not one.
 */
int
RegionIndex(const char *code)
{
	for (int i = 0; i < CD_REGION_COUNT; i++)
		if (strcmp(code, region_codes[i]) == 0)
			return i;
	return -1;
}

int
RegionDistance(int a, int b)
{
	return region_distance[a][b];
}

/*
 * RegionRegionPrefix returns the region code a key starts with, followed
 * by ':' ("enam:room123"), or NULL.
 */
const char *
RegionRegionPrefix(const char *key, int key_len)
{
	for (int i = 0; i < CD_REGION_COUNT; i++)
	{
		size_t		len = strlen(region_codes[i]);

		if ((size_t) key_len > len && key[len] == ':' &&
			memcmp(key, region_codes[i], len) == 0)
			return region_codes[i];
	}
	return NULL;
}

/*
 * EnsureValidRegion fails with INVALID_REGION_HINT unless 'region' is one
 * of the eleven codes.
 */
void
EnsureValidRegion(const char *region)
{
	if (RegionIndex(region) < 0)
		ereport(ERROR,
				(errcode(ERRCODE_CD_INVALID_REGION_HINT),
				 errmsg("invalid region \"%s\"", region),
				 errhint("Valid regions are: wnam, enam, sam, weur, eeur, apac, apac-ne, apac-se, oc, afr, me.")));
}
