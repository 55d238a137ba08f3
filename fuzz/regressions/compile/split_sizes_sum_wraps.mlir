module attributes {kiln.device = "cpu:0", kiln.entry = @main} {
  func.func @main(%arg0: tensor<2x3xf32>) -> tensor<2x9223372036854775807xf32> {
    %0:3 = "kiln.split"(%arg0) {axis = 1, sizes = [9223372036854775807, 9223372036854775807, 5]} : (tensor<2x3xf32>) -> (tensor<2x9223372036854775807xf32>, tensor<2x9223372036854775807xf32>, tensor<2x5xf32>)
    return %0#0 : tensor<2x9223372036854775807xf32>
  }
}
