// TokengateGateway module placeholder; replaced as the module grows.
